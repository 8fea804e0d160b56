/**
 * Warm start from a peer replica, end to end: two real routers on loopback HTTP, both
 * subscribed to the same real ZeroMQ engine publishers. Router B starts with
 * `snapshot.fromPeer` = router A: it fetches A's `GET /v1/snapshot`, checks it as a file,
 * is warm before any replay, and resumes each stream from A's saved seq + 1. A peer that
 * serves damaged, cut-short or other-version bytes, or refuses the token, is refused with
 * a log line and a cold start.
 */

import { createServer, type Server } from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import { EnginePublisher } from "../src/engine/publisher.js";
import type { WireBatch } from "../src/protocol/event-encoder.js";
import {
  held,
  listenJson,
  publisherWorkers,
  startTestService,
  streamOf,
  type TestService,
} from "./http-harness.js";
import { waitFor } from "./zmq-helpers.js";

const BS = 16;
const TOKEN = "peer-secret";
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const prompt = (e: number, k: number) =>
  Array.from({ length: 4 * BS }, (_, i) => e * 1e6 + k * 1e3 + i);
const batch = (e: number, k: number): WireBatch => ({
  ts: k,
  dpRank: null,
  events: [
    {
      type: "BlockStored",
      blockHashes: [0n, 1n, 2n, 3n].map((i) => BigInt(e * 1000 + k * 10) + i),
      parentHash: null,
      tokenIds: prompt(e, k),
      blockSize: BS,
      loraId: null,
      medium: "GPU",
      loraName: null,
    },
  ],
});

async function engines(n: number): Promise<EnginePublisher[]> {
  const out: EnginePublisher[] = [];
  for (let i = 0; i < n; i++) {
    const p = await EnginePublisher.bind({
      endpoint: "tcp://127.0.0.1:*",
      replayEndpoint: "tcp://127.0.0.1:*",
      topic: "kv",
    });
    cleanups.push(() => p.close());
    out.push(p);
  }
  return out;
}

function config(pubs: EnginePublisher[], snapshot: Record<string, unknown> = {}) {
  return {
    server: { authToken: TOKEN },
    index: { blockSize: BS },
    snapshot,
    events: { replayTimeoutMs: 2000 },
    workers: publisherWorkers(pubs, 18300),
  };
}

async function start(raw: Record<string, unknown>): Promise<TestService> {
  const s = await startTestService(raw);
  cleanups.push(() => s.close());
  return s;
}

async function metrics(svc: TestService): Promise<string> {
  return (await svc.app.inject({ method: "GET", url: "/metrics" })).body;
}

/** A loopback HTTP server answering every request with `status` and `body`. */
async function servePeer(status: number, body: Uint8Array): Promise<string> {
  const server: Server = createServer((_req, res) => {
    res.writeHead(status, { "content-type": "application/octet-stream" });
    res.end(body);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  cleanups.push(() => new Promise((r) => server.close(r)));
  const a = server.address();
  if (a === null || typeof a === "string") throw new Error("not listening");
  return `http://127.0.0.1:${a.port}`;
}

describe("warm start from a peer's GET /v1/snapshot", () => {
  it("starts warm from the peer and replays each stream only past the peer's saved seq", async () => {
    const pubs = await engines(3);
    for (let e = 0; e < 3; e++) for (let k = 0; k < 5; k++) pubs[e]!.publish(batch(e, k));
    const a = await start(config(pubs));
    const { base } = await listenJson(a);
    await waitFor("A filled", () => a.index.stats().workerBlocks === 60);

    // The route is behind server.authToken.
    expect((await fetch(`${base}/v1/snapshot`)).status).toBe(401);

    const b = await start(config(pubs, { fromPeer: base }));
    // Warm before any replay: every prompt A had is matched on B at once.
    for (let e = 0; e < 3; e++)
      for (let k = 0; k < 5; k++) expect(held(b, `e${e}`, prompt(e, k), BS)).toBe(4);
    const restored = b.logs.find((l) => String(l.msg).startsWith("index snapshot restored"));
    expect(restored?.source).toBe("peer");
    expect(restored?.from).toBe(`${base}/v1/snapshot`);

    // New batches reach both. B resumed at A's saved seq + 1 (= 5): at most batch 5 is
    // replayed (when B's subscription joins after it was sent), never 0..4 again.
    for (let e = 0; e < 3; e++) pubs[e]!.publish(batch(e, 5));
    await waitFor("both routers took batch 5", () =>
      [a, b].every((s) => [0, 1, 2].every((e) => held(s, `e${e}`, prompt(e, 5), BS) === 4)),
    );
    for (let e = 0; e < 3; e++) {
      const s = await streamOf(b, `e${e}`);
      expect(Object.values(s.resets as Record<string, number>).every((n) => n === 0)).toBe(true);
      expect(s.replayed_batches).toBeLessThanOrEqual(1);
      expect(s.last_seq).toBe("5");
    }
    expect(b.index.stats().workerBlocks).toBe(a.index.stats().workerBlocks);
    expect(await metrics(b)).toContain(
      'kvrouter_snapshot_load_result{result="warm",source="peer",reason="peer"} 1',
    );
    expect(await metrics(a)).toMatch(/kvrouter_snapshot_exports_total 1\n/);
    expect(await metrics(a)).toContain(
      'kvrouter_snapshot_load_result{result="cold",source="none",reason="off"} 1',
    );
  }, 30_000);

  it("refuses a damaged, cut-short or other-version snapshot, and a wrong token: cold start", async () => {
    const pubs = await engines(1);
    for (let k = 0; k < 3; k++) pubs[0]!.publish(batch(0, k));
    const a = await start(config(pubs));
    const { base } = await listenJson(a);
    await waitFor("A filled", () => a.index.stats().workerBlocks === 12);
    const res = await fetch(`${base}/v1/snapshot`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(res.headers.get("content-type")).toBe("application/octet-stream");
    const good = new Uint8Array(await res.arrayBuffer());

    const flipped = good.slice();
    flipped[Math.floor(flipped.length / 2)]! ^= 0xff;
    const version = good.slice();
    version[8] = 99;
    const cases: [string, number, Uint8Array, string, string][] = [
      ["checksum", 200, flipped, "refused", "checksum"],
      ["truncated", 200, good.subarray(0, good.length - 20), "refused", "truncated"],
      ["version", 200, version, "refused", "version"],
      ["status", 401, new TextEncoder().encode("no"), "cold", "peer_http_status"],
    ];
    for (const [what, status, body, result, reason] of cases) {
      const peer = await servePeer(status, body);
      const b = await start(config(pubs, { fromPeer: peer }));
      expect(b.index.stats().nodes, what).toBe(0); // nothing half-loaded
      const line = b.logs.find((l) => String(l.msg).includes("from peer"));
      expect(line?.msg, what).toBe(
        result === "refused"
          ? "index snapshot from peer refused, starting cold"
          : "index snapshot from peer unavailable, starting cold",
      );
      expect(await metrics(b), what).toContain(
        `kvrouter_snapshot_load_result{result="${result}",source="peer",reason="${reason}"} 1`,
      );
      // Cold, but not blind: the stream refills B from the engine's buffer.
      await waitFor(
        `${what}: refilled from the engine`,
        () => held(b, "e0", prompt(0, 2), BS) === 4,
      );
      await b.close();
    }
    // The good bytes, served by the same kind of peer, start warm.
    const b = await start(config(pubs, { fromPeer: await servePeer(200, good) }));
    expect(held(b, "e0", prompt(0, 0), BS)).toBe(4);
  }, 30_000);
});
