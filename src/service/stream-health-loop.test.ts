import { describe, expect, it } from "vitest";
import { computeBlockKeys } from "../index/block-key.js";
import { StreamCounters } from "../ingest/stream-state.js";
import { LoadTracker } from "../load/load-tracker.js";
import { WorkerRegistry } from "../load/worker-registry.js";
import { PredictedBlocks } from "../predict/predicted-blocks.js";
import { noopLogger } from "../util/log-sink.js";
import { StreamHealthLoop } from "./stream-health-loop.js";

const BS = 4;
const keys = computeBlockKeys(
  Array.from({ length: 8 * BS }, (_, i) => i),
  BS,
  null,
);

function setup() {
  const registry = new WorkerRegistry();
  const w = registry.upsert({
    workerId: "a",
    url: "http://10.0.0.1:8000",
    kind: "vllm",
    blockSize: BS,
    numGpuBlocks: 100,
  }).key;
  const predicted = new PredictedBlocks({
    ttlMs: 2_000,
    maxBlocksPerWorker: 1_000,
    degradedTtlMs: 600_000,
  });
  const counters = new StreamCounters();
  let now = 0;
  const loop = new StreamHealthLoop({
    predicted,
    streams: () => [
      counters.snapshot({
        worker: w,
        endpoint: "tcp://10.0.0.1:5557",
        replayEndpoint: null,
        topic: "",
        format: "vllm",
      }),
    ],
    registry,
    loads: new LoadTracker({ staleAfterMs: 1_000 }),
    nowMs: () => now,
    logger: noopLogger,
    fallback: true,
    defaultCapacityBlocks: 100,
  });
  const tick = (t: number) => {
    now = t;
    loop.tick();
  };
  return { w, predicted, counters, tick };
}

describe("StreamHealthLoop", () => {
  for (const [what, wipe] of [
    ["AllBlocksCleared", (c: StreamCounters) => c.countEvent("cleared", "applied")],
    ["a restart", (c: StreamCounters) => c.resets.restart++],
  ] as const) {
    it(`drops a degraded worker's approximate view when its engine reports ${what}`, () => {
      const { w, predicted, counters, tick } = setup();
      tick(0);
      counters.resets.unfilled_gap++;
      tick(1_000);
      expect(predicted.isDegraded(w)).toBe(true);
      predicted.record(w, keys, 1_100);
      expect(predicted.match(keys, 1_200).get(w)).toBe(8);
      // The engine emptied its cache: nothing routed there before is held any more.
      wipe(counters);
      counters.lastEventTimeMs = 1_500;
      tick(2_000);
      expect(predicted.match(keys, 2_100).get(w)).toBeUndefined();
      // Still degraded: what is routed from now on forms the view again.
      expect(predicted.isDegraded(w)).toBe(true);
      predicted.record(w, keys, 2_200);
      expect(predicted.match(keys, 2_300).get(w)).toBe(8);
    });
  }
});
