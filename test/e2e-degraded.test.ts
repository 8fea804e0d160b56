/**
 * End to end: a worker whose event stream loses batches it cannot replay (an engine
 * publisher with no replay endpoint, and a gap) is routed by its approximate view: it is
 * marked degraded in `/v1/workers` and the metrics, a prompt routed to it counts as held
 * there (`predicted_blocks`, never in `/v1/match`), and when its stream applies cleanly
 * again it goes back to precise routing and the approximate entries are gone. Real
 * ZeroMQ, real HTTP on loopback.
 */

import { afterEach, describe, expect, it } from "vitest";
import { EnginePublisher } from "../src/engine/publisher.js";
import { type Json, listenJson, startTestService } from "./http-harness.js";
import { waitFor } from "./zmq-helpers.js";

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const BLOCK = 16;
const tokens = (n: number, from: number) => Array.from({ length: n * BLOCK }, (_, i) => from + i);
const HELD = tokens(4, 500);
const NEW_PROMPT = tokens(6, 9000);

const stored = (hashes: bigint[], tokenIds: number[], parent: bigint | null = null) => ({
  ts: 1,
  dpRank: null,
  events: [
    {
      type: "BlockStored" as const,
      blockHashes: hashes,
      parentHash: parent,
      tokenIds,
      blockSize: BLOCK,
      loraId: null,
      medium: "GPU",
      loraName: null,
    },
  ],
});
const empty = () => ({ ts: 1, dpRank: null, events: [] });

describe("degraded mode when a worker's event stream breaks", () => {
  it("routes the worker by its routed requests after an unfilled gap, then back to precise", async () => {
    const pub = await EnginePublisher.bind({
      endpoint: "tcp://127.0.0.1:*",
      replayEndpoint: null,
      topic: "kv-events",
    });
    cleanups.push(() => pub.close());
    const svc = await startTestService({
      // Predict-on-route off: what the test sees is the degraded view alone.
      predict: { ttlMs: 0, fallback: true, recoverAfterMs: 400, silentAfterMs: 60_000 },
      workers: [
        {
          id: "e0",
          url: "http://127.0.0.1:18100",
          eventsEndpoint: pub.endpoint,
          replayEndpoint: null,
          topic: "kv-events",
          metricsUrl: null,
          numGpuBlocks: 1000,
        },
      ],
    });
    cleanups.push(() => svc.close());
    const { base, post, get } = await listenJson(svc);
    const e0 = async () => (await get("/v1/workers")).workers[0] as Json;
    const predictedOf = (route: Json) => route.candidates[0].predicted_blocks as number;

    // Live stream, then the engine stores a prompt: the index has it.
    const deadline = Date.now() + 15_000;
    while (svc.index.stats().workerBlocks < 4) {
      if (Date.now() > deadline) throw new Error("stream never became live");
      pub.publish(stored([11n, 12n, 13n, 14n], HELD));
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect((await e0()).degraded).toBe(false);
    // Healthy and predict-on-route off: a routed prompt is not counted anywhere.
    await post("/v1/route", { token_ids: NEW_PROMPT, request_id: "h1" });
    expect(predictedOf(await post("/v1/route", { token_ids: NEW_PROMPT, request_id: "h2" }))).toBe(
      0,
    );

    // Batches lost on the wire, and no replay endpoint to bring them back.
    pub.dropNext(2);
    pub.publish(empty());
    pub.publish(empty());
    pub.publish(empty());
    await waitFor("unfilled gap", () => svc.index.stats().workerBlocks === 0);
    await until("degraded", async () => (await e0()).degraded === true);
    const view = await e0();
    expect(view.ranks[0].degraded).toMatchObject({ reason: "unfilled_gap" });
    expect(view.ranks[0].stream.resets.unfilled_gap).toBe(1);
    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(metrics).toMatch(/^kvrouter_worker_degraded\{worker="e0#0",reason="unfilled_gap"\} 1$/m);

    // Degraded: a prompt routed there counts as held (predicted, never reported).
    await post("/v1/route", { token_ids: NEW_PROMPT, request_id: "d1" });
    const again = await post("/v1/route", { token_ids: NEW_PROMPT, request_id: "d2" });
    expect(again.candidates[0]).toMatchObject({ predicted_blocks: 6, reported_blocks: 0 });
    expect(again.overlap_blocks).toBe(6);
    const match = await post("/v1/match", { token_ids: NEW_PROMPT });
    expect(match.workers[0].overlap_blocks.gpu).toBe(0);

    // The stream applies cleanly again (new roots, no parent missing): precise once more,
    // and the approximate entries are gone (no false positive left behind).
    let root = 1000n;
    await until(
      "healthy again",
      async () => {
        root++;
        pub.publish(stored([root], tokens(1, 70_000 + Number(root) * BLOCK)));
        return (await e0()).degraded === false;
      },
      10_000,
    );
    const after = await post("/v1/route", { token_ids: NEW_PROMPT, request_id: "p1" });
    expect(predictedOf(after)).toBe(0);
    expect(after.overlap_blocks).toBe(0);
  });
});
