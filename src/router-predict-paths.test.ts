/**
 * Predict-on-route through both scoring paths, on the real index: what `matchBeyond`
 * confirms must not depend on the path. A request that excludes a worker, or is for
 * another model, still meets that worker's predictions of blocks its engine reported;
 * the full path confirms them (so an eviction after the report cannot turn them into a
 * claim), and the column path must too.
 */

import { describe, expect, it } from "vitest";
import { RadixTreeIndex } from "./index/radix-tree.js";
import { InFlightTracker } from "./load/in-flight.js";
import { LoadTracker } from "./load/load-tracker.js";
import { WorkerRegistry } from "./load/worker-registry.js";
import { PredictedBlocks } from "./predict/predicted-blocks.js";
import { engineHashFromSafeInt } from "./protocol/engine-hash.js";
import type { WorkerKey } from "./protocol/worker.js";
import { Router } from "./router.js";
import type { RouteRequest } from "./router-types.js";
import { resolveSchedulerConfig } from "./scheduler/config.js";

const BS = 4;
const tokens = (blocks: number, seed = 1) =>
  Array.from({ length: blocks * BS }, (_, i) => seed * 10_000 + i);

function world(fullScoring: boolean, models: (string | null)[]) {
  const index = new RadixTreeIndex({ blockSize: BS });
  const registry = new WorkerRegistry();
  const inFlight = new InFlightTracker({ prefillTtlMs: 10_000, ttlMs: 60_000 });
  const predicted = new PredictedBlocks({
    ttlMs: 2_000,
    maxBlocksPerWorker: 1_000,
    degradedTtlMs: 0,
  });
  const keys = models.map(
    (model, i) =>
      registry.upsert({
        workerId: `w${i}`,
        url: `http://10.0.0.${i}:8000`,
        kind: "vllm",
        blockSize: BS,
        ...(model === null ? {} : { model }),
      }).key,
  );
  /** A router over this index with its own predictions (a second one shares the index). */
  const newRouter = (p: PredictedBlocks) =>
    new Router({
      index,
      registry,
      loads: new LoadTracker({ staleAfterMs: 1_000 }),
      inFlight,
      config: resolveSchedulerConfig({
        weights: { queue: 0, pending: 0, decode: 0 },
        outlierStdK: Infinity,
      }),
      rng: () => 0,
      candidateBreakdownLimit: 1,
      fullScoring,
      predicted: p,
    });
  const router = newRouter(predicted);
  /** The engine of `w` stores `blocks` blocks of `seed`'s prompt (hashes 100·seed + i). */
  const store = (w: WorkerKey, blocks: number, seed = 1) =>
    index.applyEvent(w, {
      type: "stored",
      blockHashes: Array.from({ length: blocks }, (_, i) => engineHashFromSafeInt(seed * 100 + i)),
      parentHash: null,
      tokenIds: tokens(blocks, seed),
      blockSize: BS,
      loraId: null,
      loraName: null,
      medium: "GPU",
      tier: "gpu",
    });
  /** ...and evicts its blocks from..to−1. */
  const evict = (w: WorkerKey, from: number, to: number, seed = 1) =>
    index.applyEvent(w, {
      type: "removed",
      blockHashes: Array.from({ length: to - from }, (_, i) =>
        engineHashFromSafeInt(seed * 100 + from + i),
      ),
      medium: "GPU",
      tier: "gpu",
    });
  const route = (req: RouteRequest, now: number, by = router) => {
    const r = by.route(req, now);
    if (!r.ok) throw new Error(r.error.message);
    // Done at once: no queued prefill weighs on the next decision.
    inFlight.done(r.decision.requestId, now);
    return r.decision;
  };
  const twin = () =>
    newRouter(new PredictedBlocks({ ttlMs: 2_000, maxBlocksPerWorker: 1_000, degradedTtlMs: 0 }));
  return {
    router,
    twin,
    keys,
    store,
    evict,
    route,
    clear: (w: WorkerKey) => index.removeWorker(w),
  };
}

/** The overlap the chosen worker was credited with, and the worker. */
const credited = (d: { worker: WorkerKey; overlapBlocks: number }) => [d.worker, d.overlapBlocks];

describe("predict-on-route after the engine evicts what it reported", () => {
  for (const [path, full] of [
    ["every candidate scored", true],
    ["columns", false],
  ] as const) {
    it(`does not credit blocks stored and then removed before any lookup met them (${path})`, () => {
      const w = world(full, [null, null, null, null]);
      const [a, b, c, d] = w.keys as [WorkerKey, WorkerKey, WorkerKey, WorkerKey];
      const first = w.route({ tokenIds: tokens(8), exclude: new Set([b, c, d]) }, 0);
      expect(first.worker).toBe(a);
      // a's engine stores the 8 blocks and evicts the last 4 within the TTL, with no request
      // for the prefix routed in between.
      w.store(a, 8);
      w.evict(a, 4, 8);
      const again = w.route({ tokenIds: tokens(8) }, 20);
      expect(credited(again)).toEqual([a, 4]);
    });
  }
});

describe("predict-on-route with two routers over one index", () => {
  it("an eviction ends the predictions of both (each registered its own listener)", () => {
    const w = world(true, [null, null, null, null]);
    const second = w.twin();
    const [a, b, c, d] = w.keys as [WorkerKey, WorkerKey, WorkerKey, WorkerKey];
    const others = new Set([b, c, d]);
    expect(w.route({ tokenIds: tokens(8), exclude: others }, 0).worker).toBe(a);
    expect(w.route({ tokenIds: tokens(8), exclude: others }, 0, second).worker).toBe(a);
    w.store(a, 8);
    w.evict(a, 4, 8);
    expect(credited(w.route({ tokenIds: tokens(8) }, 20))).toEqual([a, 4]);
    expect(credited(w.route({ tokenIds: tokens(8) }, 20, second))).toEqual([a, 4]);
  });
});

describe("predict-on-route confirms the same predictions on both scoring paths", () => {
  for (const [path, full] of [
    ["every candidate scored", true],
    ["columns", false],
  ] as const) {
    it(`a request excluding the holder confirms its reported predictions (${path})`, () => {
      const w = world(full, [null, null, null, null]);
      const [a, b, c, d] = w.keys as [WorkerKey, WorkerKey, WorkerKey, WorkerKey];
      // 8 blocks routed to a (predicted there), then reported by a's engine.
      const first = w.route({ tokenIds: tokens(8), exclude: new Set([b, c, d]) }, 0);
      expect(first.worker).toBe(a);
      w.store(a, 8);
      // A longer prompt routed elsewhere meets a's reported predictions (a excluded).
      const second = w.route({ tokenIds: tokens(12), exclude: new Set([a]) }, 10);
      expect(second.worker).not.toBe(a);
      // a's engine evicts the last 4 blocks; the next request may credit a with 4 only.
      w.evict(a, 4, 8);
      const third = w.route({ tokenIds: tokens(8), exclude: new Set([second.worker]) }, 20);
      expect(credited(third)).toEqual([a, 4]);
      expect(w.router.columnStats.decisions).toBe(full ? 0 : 2);
    });

    it(`...and after an index clear the paths still agree (${path})`, () => {
      const w = world(full, [null, null, null, null]);
      const [a, b, c, d] = w.keys as [WorkerKey, WorkerKey, WorkerKey, WorkerKey];
      expect(w.route({ tokenIds: tokens(8), exclude: new Set([b, c, d]) }, 0).worker).toBe(a);
      w.store(a, 8);
      const second = w.route({ tokenIds: tokens(12), exclude: new Set([a]) }, 10);
      // A stream reset clears a's index entries (no removed events): the predictions the
      // report replaced are gone on both paths, so a holds nothing the router can count.
      w.clear(a);
      const third = w.route({ tokenIds: tokens(8), exclude: new Set([second.worker]) }, 20);
      expect(third.overlapBlocks).toBe(0);
    });

    it(`a request for another model confirms the holder's reported predictions (${path})`, () => {
      const w = world(full, ["m", "m", "m", "n", "n", "n"]);
      const [a, b, c] = w.keys as [WorkerKey, WorkerKey, WorkerKey];
      const first = w.route({ tokenIds: tokens(8), model: "m", exclude: new Set([b, c]) }, 0);
      expect(first.worker).toBe(a);
      w.store(a, 8);
      // Same tokens for model n: a is not routable, but its predictions are met.
      w.route({ tokenIds: tokens(8), model: "n" }, 10);
      // A stream reset clears a's index entries: nothing left to count on either path.
      w.clear(a);
      expect(w.route({ tokenIds: tokens(8), model: "m" }, 20).overlapBlocks).toBe(0);
    });
  }
});
