/**
 * The scraper's HTTP GET over real loopback sockets: bodies, size limits with and
 * without a declared length, and a kept-alive connection the server drops as it is
 * reused (retried once on a new connection, as `fetch` did for us before).
 */

import { createServer, type Server } from "node:http";
import type { Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { getText } from "../src/ingest/http-text.js";

let server: Server | null = null;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((r) => server?.close(r) ?? r(null));
  server = null;
});

async function serve(handler: Parameters<typeof createServer>[1]): Promise<string> {
  server = createServer(handler);
  await new Promise<void>((r) => server!.listen(0, "127.0.0.1", r));
  const addr = server.address();
  return `http://127.0.0.1:${typeof addr === "object" && addr !== null ? addr.port : 0}`;
}

const signal = () => AbortSignal.timeout(2000);

describe("getText", () => {
  it("returns the body, or the status of a non-2xx answer", async () => {
    const url = await serve((req, res) => {
      if (req.url === "/missing") res.writeHead(404).end("no");
      else res.writeHead(200, { "content-type": "text/plain" }).end("vllm:x 1\n");
    });
    expect(await getText(`${url}/metrics`, signal(), 1000)).toEqual({
      ok: true,
      text: "vllm:x 1\n",
    });
    expect(await getText(`${url}/missing`, signal(), 1000)).toEqual({ ok: false, status: 404 });
  });

  it("refuses a body over the limit, declared or streamed", async () => {
    const url = await serve((req, res) => {
      if (req.url === "/declared") res.writeHead(200).end("x".repeat(5000));
      else {
        res.writeHead(200); // chunked: no content-length
        res.write("x".repeat(3000));
        res.end("y".repeat(3000));
      }
    });
    expect(await getText(`${url}/declared`, signal(), 4096)).toEqual({ ok: false, tooLarge: 5000 });
    const streamed = await getText(`${url}/chunked`, signal(), 4096);
    expect(streamed.ok).toBe(false);
    expect("tooLarge" in streamed && streamed.tooLarge > 4096).toBe(true);
  });

  it("retries once when the server drops a kept-alive connection as it is reused", async () => {
    const served = new Map<Socket, number>();
    const url = await serve((req, res) => {
      const n = (served.get(req.socket) ?? 0) + 1;
      served.set(req.socket, n);
      if (n >= 2)
        req.socket.destroy(); // the server's idle timeout won the race
      else res.writeHead(200).end("ok");
    });
    expect(await getText(`${url}/metrics`, signal(), 100)).toEqual({ ok: true, text: "ok" });
    expect(await getText(`${url}/metrics`, signal(), 100)).toEqual({ ok: true, text: "ok" });
    expect(served.size).toBe(2);
  });
});
