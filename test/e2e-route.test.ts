/**
 * End to end over real sockets: two engines impersonated by `EnginePublisher` (vLLM wire
 * bytes over ZeroMQ on loopback, with replay) → the service's `SubscriberPool` → index
 * → `POST /v1/route` over real HTTP. The worker that holds the prefix wins; pushed load
 * then moves the choice to the other one.
 */

import { afterEach, describe, expect, it } from "vitest";
import { EnginePublisher } from "../src/engine/publisher.js";
import type { WireBatch } from "../src/protocol/event-encoder.js";
import { startTestService, type TestService } from "./http-harness.js";
import { emptyBatch } from "./zmq-helpers.js";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const BLOCK = 16;
const PROMPT = Array.from({ length: 8 * BLOCK + 5 }, (_, i) => 1000 + ((i * 7919) % 50_000));

/** What vLLM sends when a request's first six blocks enter its prefix cache. */
function storedPrefix(blocks: number): WireBatch {
  return {
    ts: Date.now() / 1000,
    dpRank: 0,
    events: [
      {
        type: "BlockStored",
        blockHashes: Array.from({ length: blocks }, (_, i) => 0xf000_0000_0000_0000n + BigInt(i)),
        parentHash: null,
        tokenIds: PROMPT.slice(0, blocks * BLOCK),
        blockSize: BLOCK,
        loraId: null,
        medium: "GPU",
        loraName: null,
      },
    ],
  };
}

/** Response bodies are checked field by field below; `any` keeps those reads short. */
// biome-ignore lint/suspicious/noExplicitAny: JSON read in assertions only
type Json = Record<string, any>;

async function json(base: string, method: string, path: string, body?: unknown) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: body === undefined ? {} : { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Json };
}

describe("end to end: engine events → index → POST /v1/route over HTTP", () => {
  it("routes to the worker holding the prefix, and away from it under load", async () => {
    const engines: EnginePublisher[] = [];
    for (let i = 0; i < 2; i++) {
      const e = await EnginePublisher.bind({
        endpoint: "tcp://127.0.0.1:*",
        replayEndpoint: "tcp://127.0.0.1:*",
        topic: "kv-events",
      });
      cleanups.push(() => e.close());
      engines.push(e);
    }
    const svc: TestService = await startTestService({
      workers: engines.map((e, i) => ({
        id: `engine-${i}`,
        url: `http://127.0.0.1:${18000 + i}`,
        eventsEndpoint: e.endpoint,
        replayEndpoint: e.replayEndpoint,
        topic: "kv-events",
        metricsUrl: null,
      })),
    });
    cleanups.push(() => svc.close());
    await svc.app.listen({ host: "127.0.0.1", port: 0 });
    const address = svc.app.server.address();
    if (address === null || typeof address === "string") throw new Error("not listening");
    const base = `http://127.0.0.1:${address.port}`;

    // Wait until both live streams deliver (PUB/SUB drops messages sent before the
    // subscription is in place), probing with empty batches as an idle engine would.
    const batches = async () =>
      (await json(base, "GET", "/v1/workers")).body.workers.map(
        (w: { ranks: { stream: { batches: number } }[] }) => w.ranks[0]!.stream.batches,
      );
    let seen: number[] = [0, 0];
    for (let attempt = 0; attempt < 300 && !seen.every((n) => n > 0); attempt++) {
      for (const e of engines) e.publish(emptyBatch());
      await new Promise((r) => setTimeout(r, 50));
      seen = await batches();
    }
    expect(seen.every((n) => n > 0)).toBe(true);

    engines[1]!.publish(storedPrefix(6));
    let overlap = 0;
    for (let attempt = 0; attempt < 300 && overlap < 6; attempt++) {
      const m = await json(base, "POST", "/v1/match", { token_ids: PROMPT });
      overlap = m.body.workers[1].overlap_blocks.gpu;
      if (overlap < 6) await new Promise((r) => setTimeout(r, 20));
    }
    expect(overlap).toBe(6);

    const idle = { running: 0, waiting: 0, kv_usage: 0.1 };
    for (const id of ["engine-0", "engine-1"]) {
      expect((await json(base, "PUT", `/v1/workers/${id}/load`, idle)).status).toBe(200);
    }
    const first = await json(base, "POST", "/v1/route", { token_ids: PROMPT, request_id: "a" });
    expect(first.status).toBe(200);
    expect(first.body.worker.id).toBe("engine-1");
    expect(first.body.cached_tokens).toBe(6 * BLOCK);
    expect(first.body.prompt_tokens).toBe(PROMPT.length);
    await json(base, "POST", "/v1/requests/a/done");

    // engine-1 now has a long queue: prefilling 6 blocks elsewhere is cheaper.
    const busy = { running: 64, waiting: 40, kv_usage: 0.5 };
    expect((await json(base, "PUT", "/v1/workers/engine-1/load", busy)).status).toBe(200);
    const second = await json(base, "POST", "/v1/route", { token_ids: PROMPT, request_id: "b" });
    expect(second.status).toBe(200);
    expect(second.body.worker.id).toBe("engine-0");
    const c1 = second.body.candidates.find((c: { worker: string }) => c.worker === "engine-1#0");
    // Reported by the engine: 6; predicted by the router after routing "a" there: the
    // whole prompt (predict-on-route, docs/prediction.md), which the cost used.
    expect(c1.reported_blocks).toBe(6);
    expect(c1.predicted_blocks).toBe(Math.floor(PROMPT.length / BLOCK));
    expect(c1.overlap_blocks.gpu).toBe(Math.floor(PROMPT.length / BLOCK));
    expect(c1.cost.queue).toBeGreaterThan(0);

    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(metrics).toMatch(/^kvrouter_events_batches_total\{worker="engine-1#0"\} [1-9]/m);
    expect(metrics).toMatch(/^kvrouter_events_connected\{worker="engine-0#0"\} 1$/m);
    expect(metrics).toContain(
      'kvrouter_route_decisions_total{worker="engine-0#0",reason="lowest_cost"} 1',
    );
  });
});
