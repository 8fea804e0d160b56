import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { fetchPeerSnapshot, snapshotUrl } from "./snapshot-peer.js";

const servers: ReturnType<typeof createServer>[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

describe("fetchPeerSnapshot", () => {
  it("keeps the peer URL's path: a replica behind a path prefix is asked there", async () => {
    const paths: string[] = [];
    const server = createServer((req, res) => {
      paths.push(req.url ?? "");
      if (req.url === "/router-a/v1/snapshot") res.end(Buffer.from([1, 2, 3]));
      else res.writeHead(404).end("not here");
    });
    servers.push(server);
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const { port } = server.address() as AddressInfo;
    for (const base of [
      `http://127.0.0.1:${port}/router-a`,
      `http://127.0.0.1:${port}/router-a/`,
    ]) {
      const got = await fetchPeerSnapshot(base, { token: null, timeoutMs: 5000 });
      expect(got.ok, JSON.stringify(got)).toBe(true);
      if (got.ok) expect([...got.bytes]).toEqual([1, 2, 3]);
    }
    expect(paths).toEqual(["/router-a/v1/snapshot", "/router-a/v1/snapshot"]);
  });

  it("at the host's root the URL is /v1/snapshot, with or without a trailing slash", () => {
    expect(snapshotUrl("http://router-a:8080")).toBe("http://router-a:8080/v1/snapshot");
    expect(snapshotUrl("http://router-a:8080/")).toBe("http://router-a:8080/v1/snapshot");
  });
});
