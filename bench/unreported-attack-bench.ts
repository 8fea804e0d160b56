/**
 * A client that routes and never sends nor reports (issue 15 §4), in virtual time through
 * the router's own code (Router, RadixTreeIndex, LoadTracker, InFlightTracker, default
 * scheduler): 4 workers of 2,048 KV blocks, 8 shared 128-block prefixes (two cached per
 * worker), 20 legitimate requests/s over them (each reported done after 2 s, and visible
 * in the engine's scraped figures while it runs), scrapes every second. The attacker
 * routes prefix 0 (cached on w0) 100 times a second and reports nothing.
 *
 *   npx tsx bench/unreported-attack-bench.ts
 *
 * Figures per scenario: mean GPU overlap (blocks of 128) of legitimate requests whose
 * prefix lives on w0, and the share of their decisions in which w0 was excluded. Last
 * line: JSON.
 */

import { RadixTreeIndex } from "../src/index/radix-tree.js";
import { InFlightTracker } from "../src/load/in-flight.js";
import { LoadTracker } from "../src/load/load-tracker.js";
import { WorkerRegistry } from "../src/load/worker-registry.js";
import { engineHashFromSafeInt } from "../src/protocol/engine-hash.js";
import type { WorkerKey } from "../src/protocol/worker.js";
import { Router } from "../src/router.js";
import { DEFAULT_SCHEDULER_CONFIG } from "../src/scheduler/defaults.js";

const BS = 16;
const CAPACITY = 2048;
const PREFIX_BLOCKS = 128;
const WORKERS = 4;
const PREFIXES = 8;
const DURATION_MS = 120_000;

const prefix = (k: number) =>
  Array.from({ length: PREFIX_BLOCKS * BS }, (_, i) => 1 + k * 100_000 + i);

function run(attack: boolean) {
  const index = new RadixTreeIndex({ blockSize: BS });
  const registry = new WorkerRegistry();
  const loads = new LoadTracker({ staleAfterMs: 5000 });
  const inFlight = new InFlightTracker({ prefillTtlMs: 60_000, ttlMs: 600_000 });
  let seed = 7;
  const rng = () => {
    seed = (seed * 16807) % 2147483647;
    return seed / 2147483647;
  };
  const router = new Router({
    index,
    registry,
    loads,
    inFlight,
    config: DEFAULT_SCHEDULER_CONFIG,
    rng,
    maxInFlightPerWorker: 8192,
  });
  const keys: WorkerKey[] = [];
  for (let w = 0; w < WORKERS; w++) {
    const info = registry.upsert({
      workerId: `w${w}`,
      url: `http://127.0.0.1:${9000 + w}`,
      kind: "vllm",
      blockSize: BS,
    });
    keys.push(info.key);
    loads.track(info.key, 0);
  }
  for (let k = 0; k < PREFIXES; k++) {
    index.applyEvent(keys[k % WORKERS]!, {
      type: "stored",
      blockHashes: Array.from({ length: PREFIX_BLOCKS }, (_, i) =>
        engineHashFromSafeInt(k * 1000 + i + 1),
      ),
      parentHash: null,
      tokenIds: prefix(k),
      blockSize: BS,
      loraId: null,
      loraName: null,
      medium: null,
      tier: "gpu",
    });
  }
  // What each engine really runs: legitimate requests only (the attacker sends nothing).
  const running = keys.map(() => new Map<string, number>());
  const doneAt: { at: number; id: string; w: number }[] = [];
  let overlapSum = 0;
  let onW0 = 0;
  let w0Excluded = 0;
  let legit = 0;
  for (let t = 0; t < DURATION_MS; t += 10) {
    if (t % 1000 === 0) {
      for (let w = 0; w < WORKERS; w++) {
        let blocks = 0.2 * CAPACITY;
        for (const b of running[w]!.values()) blocks += b;
        loads.update(
          keys[w]!,
          {
            running: running[w]!.size,
            waiting: 0,
            kvUsage: Math.min(1, blocks / CAPACITY),
            numGpuBlocks: CAPACITY,
            atMs: t,
          },
          t,
        );
      }
    }
    while (doneAt.length > 0 && doneAt[0]!.at <= t) {
      const d = doneAt.shift()!;
      inFlight.done(d.id, t);
      running[d.w]!.delete(d.id);
    }
    if (attack) router.route({ tokenIds: prefix(0) }, t);
    if (t % 50 === 0) {
      const k = legit % PREFIXES;
      const tail = Array.from({ length: 32 }, (_, i) => 900_000 + legit * 32 + i);
      const r = router.route({ tokenIds: [...prefix(k), ...tail], requestId: `L${legit}` }, t);
      legit++;
      if (!r.ok) throw new Error(r.error.message);
      const w = keys.indexOf(r.decision.worker);
      running[w]!.set(r.decision.requestId, r.decision.blocks);
      doneAt.push({ at: t + 2000, id: r.decision.requestId, w });
      if (k % WORKERS === 0) {
        onW0++;
        overlapSum += r.decision.overlapBlocks;
        if (r.decision.candidates.find((c) => c.worker === keys[0])!.excluded !== null) {
          w0Excluded++;
        }
      }
    }
  }
  return {
    mean_overlap_blocks: Math.round((overlapSum / onW0) * 10) / 10,
    w0_excluded_share: Math.round((w0Excluded / onW0) * 1000) / 1000,
    dropped_by_cap: router.droppedInFlight,
  };
}

const quiet = run(false);
const attacked = run(true);
console.log(`of ${PREFIX_BLOCKS} blocks, legitimate requests for w0's prefixes:`);
console.log(
  `  no attack: mean overlap ${quiet.mean_overlap_blocks}, w0 excluded ${quiet.w0_excluded_share}`,
);
console.log(
  `  attack   : mean overlap ${attacked.mean_overlap_blocks}, w0 excluded ${attacked.w0_excluded_share}, records dropped by the cap ${attacked.dropped_by_cap}`,
);
console.log(JSON.stringify({ prefix_blocks: PREFIX_BLOCKS, no_attack: quiet, attack: attacked }));
