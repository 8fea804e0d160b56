/**
 * End to end: while a worker's event stream is catching up (its replay stopped early and
 * is being resumed), `/v1/match`, `/v1/route` and `/v1/workers` say so: the overlap the
 * index reports for it is flagged `current: false`. Real ZeroMQ, real HTTP on loopback.
 */

import { afterEach, describe, expect, it } from "vitest";
import { Router } from "zeromq";
import { EnginePublisher } from "../src/engine/publisher.js";
import { encodeEventBatch } from "../src/protocol/event-encoder.js";
import { type Json, listenJson, startTestService } from "./http-harness.js";
import { waitFor } from "./zmq-helpers.js";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const BLOCK = 16;
const PROMPT = Array.from({ length: 4 * BLOCK }, (_, i) => 500 + i);

describe("a stream catching up is flagged in the HTTP answers", () => {
  it("reports current: false for the worker while its replay resumes", async () => {
    const pub = await EnginePublisher.bind({
      endpoint: "tcp://127.0.0.1:*",
      replayEndpoint: null,
      topic: "kv-events",
    });
    cleanups.push(() => pub.close());
    // A replay endpoint that sends batch 0 (the prompt's blocks) and then goes silent.
    const router = new Router({ linger: 0 });
    await router.bind("tcp://127.0.0.1:*");
    cleanups.push(async () => router.close());
    const batch0 = encodeEventBatch({
      ts: 1,
      dpRank: 0,
      events: [
        {
          type: "BlockStored",
          blockHashes: [11n, 12n, 13n, 14n],
          parentHash: null,
          tokenIds: PROMPT,
          blockSize: BLOCK,
          loraId: null,
          medium: "GPU",
          loraName: null,
        },
      ],
    });
    void (async () => {
      for await (const [id] of router) {
        await router.send([id!, "", "kv-events", Buffer.alloc(8), batch0]);
      }
    })().catch(() => {});

    const svc = await startTestService({
      events: { replayTimeoutMs: 60_000 },
      workers: [
        {
          id: "e0",
          url: "http://127.0.0.1:18100",
          eventsEndpoint: pub.endpoint,
          replayEndpoint: router.lastEndpoint,
          topic: "kv-events",
          metricsUrl: null,
        },
        { id: "e1", url: "http://127.0.0.1:18101", metricsUrl: null },
      ],
    });
    cleanups.push(() => svc.close());
    const { base, post } = await listenJson(svc);

    await waitFor("batch 0 replayed", () => svc.index.stats().workerBlocks === 4);

    const match = await post("/v1/match", { token_ids: PROMPT });
    const e0 = match.workers.find((w: Json) => w.id === "e0");
    expect(e0.overlap_blocks.gpu).toBe(4);
    expect(e0.current).toBe(false);

    const route = await post("/v1/route", { token_ids: PROMPT, request_id: "r1" });
    const byWorker = new Map(route.candidates.map((c: Json) => [c.worker, c]));
    expect((byWorker.get("e0#0") as Json).current).toBe(false);
    expect((byWorker.get("e1#0") as Json).current).toBe(true);

    const workers = (await (await fetch(`${base}/v1/workers`)).json()) as Json;
    const stream = workers.workers.find((w: Json) => w.id === "e0").ranks[0].stream;
    expect(stream.current).toBe(false);
    expect(stream.replaying).toBe(true);
    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(metrics).toMatch(/^kvrouter_events_current\{worker="e0#0"\} 0$/m);
  });
});
