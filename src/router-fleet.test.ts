/**
 * A decision over a large fleet: every routable worker is scored, the breakdown explains
 * only the lowest-cost candidates and the chosen one, and cutting it changes nothing
 * about the choice (two routers over the same state and rng agree on every request).
 */

import { describe, expect, it } from "vitest";
import { RadixTreeIndex } from "./index/radix-tree.js";
import { InFlightTracker } from "./load/in-flight.js";
import { LoadTracker } from "./load/load-tracker.js";
import { WorkerRegistry } from "./load/worker-registry.js";
import { engineHashFromSafeInt } from "./protocol/engine-hash.js";
import { DEFAULT_BREAKDOWN_LIMIT, Router } from "./router.js";
import { DEFAULT_SCHEDULER_CONFIG } from "./scheduler/defaults.js";
import { seededRng } from "./util/rng.js";

const BS = 4;
const N = 300;

function fleet(limit: number | undefined) {
  const index = new RadixTreeIndex({ blockSize: BS });
  const registry = new WorkerRegistry();
  const loads = new LoadTracker({ staleAfterMs: 60_000 });
  const inFlight = new InFlightTracker({ prefillTtlMs: 60_000, ttlMs: 600_000 });
  const gen = seededRng(5);
  for (let i = 0; i < N; i++) {
    const info = registry.upsert({
      workerId: `w${i}`,
      url: `http://10.0.${i >> 8}.${i & 255}:8000`,
      kind: "vllm",
      blockSize: BS,
      numGpuBlocks: 1000,
    });
    const kvUsage = Math.floor(gen() * 5) / 10;
    loads.update(info.key, { running: Math.floor(gen() * 3), waiting: 0, kvUsage, atMs: 0 }, 0);
    // Every 7th worker holds the first blocks of prompt (i % 3).
    if (i % 7 === 0) {
      const p = i % 3;
      const n = 1 + (i % 5);
      index.applyEvent(info.key, {
        type: "stored",
        blockHashes: Array.from({ length: n }, (_, b) => engineHashFromSafeInt(i * 100 + b)),
        parentHash: null,
        tokenIds: Array.from({ length: n * BS }, (_, t) => p * 1000 + t),
        blockSize: BS,
        loraId: null,
        loraName: null,
        medium: "GPU",
        tier: "gpu",
      });
    }
  }
  const router = new Router({
    index,
    registry,
    loads,
    inFlight,
    config: DEFAULT_SCHEDULER_CONFIG,
    rng: seededRng(9),
    ...(limit === undefined ? {} : { candidateBreakdownLimit: limit }),
  });
  return router;
}

describe("routing over a large fleet", () => {
  it("scores everyone, explains the best and the chosen, and chooses the same", () => {
    const cut = fleet(undefined);
    const full = fleet(Infinity);
    for (let r = 0; r < 40; r++) {
      const tokenIds = Array.from({ length: 6 * BS + (r % 3) }, (_, t) => (r % 3) * 1000 + t);
      const a = cut.route({ tokenIds, requestId: `r${r}` }, r);
      const b = full.route({ tokenIds, requestId: `r${r}` }, r);
      if (!a.ok || !b.ok) throw new Error("both should route");
      expect(a.decision.worker).toBe(b.decision.worker);
      expect(a.decision.prefillTokens).toBe(b.decision.prefillTokens);
      expect(a.decision.reason).toBe(b.decision.reason);
      expect(b.decision.candidates).toHaveLength(N);
      expect(a.decision.candidates).toHaveLength(DEFAULT_BREAKDOWN_LIMIT);
      const chosen = a.decision.candidates.find((c) => c.worker === a.decision.worker);
      expect(chosen).toEqual(b.decision.candidates.find((c) => c.worker === b.decision.worker));
      // Explained candidates are the cheapest of the full field (the chosen one aside).
      const worst = Math.max(
        ...a.decision.candidates.filter((c) => c !== chosen).map((c) => c.totalCost),
      );
      const cheaper = b.decision.candidates.filter(
        (c) => c.excluded === null && c.worker !== b.decision.worker && c.totalCost < worst,
      );
      expect(cheaper.length).toBeLessThan(DEFAULT_BREAKDOWN_LIMIT);
    }
  });
});
