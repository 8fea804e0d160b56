/**
 * `PredictedBlocks` (a recency queue, entries updated in place, confirmed ones marked dead)
 * against the Map-based structure it replaced (`fixtures/predict/reference-predicted-blocks.ts`):
 * under any interleaving of records (from key 0 or past a reported depth), matches,
 * lookups with the engine's reported depths (which confirm), sweeps, mode switches, clears
 * and removals — prompts sharing prefixes, a cap small enough to evict, enough records
 * to make the queue compact and grow — both answer every call the same and count the
 * same.
 */

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { computeBlockKeys } from "../src/index/block-key.js";
import { PredictedBlocks } from "../src/predict/predicted-blocks.js";
import { workerKey } from "../src/protocol/worker.js";
import { ReferencePredictedBlocks } from "./fixtures/predict/reference-predicted-blocks.js";

const BS = 4;
const WORKERS = [workerKey("a"), workerKey("b"), workerKey("c")];

/** Keys of a prompt: `shared` blocks common to every prompt, then blocks of its own. */
function keysOf(shared: number, own: number, seed: number) {
  const tokens = [
    ...Array.from({ length: shared * BS }, (_, i) => i),
    ...Array.from({ length: own * BS }, (_, i) => 1_000_000 + seed * 10_000 + i),
  ];
  return computeBlockKeys(tokens, BS, null);
}

const step = fc.record({
  dt: fc.integer({ min: 0, max: 700 }),
  op: fc.constantFrom(
    "record",
    "record",
    "record",
    "match",
    "match",
    "confirm",
    "expire",
    "degrade",
    "heal",
    "clear",
    "remove",
  ),
  worker: fc.integer({ min: 0, max: WORKERS.length - 1 }),
  shared: fc.integer({ min: 0, max: 30 }),
  own: fc.integer({ min: 0, max: 30 }),
  seed: fc.integer({ min: 0, max: 5 }),
  count: fc.integer({ min: 0, max: 70 }),
  from: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 40 })),
  capacity: fc.integer({ min: 0, max: 80 }),
});

describe("PredictedBlocks against the structure it replaced", () => {
  it("property: the same answers and counts under any interleaving", () => {
    fc.assert(
      fc.property(
        fc.array(step, { minLength: 1, maxLength: 300 }),
        fc.integer({ min: 1, max: 120 }),
        (steps, cap) => {
          const o = { ttlMs: 2000, maxBlocksPerWorker: cap, degradedTtlMs: 6000 };
          const p = new PredictedBlocks(o);
          const ref = new ReferencePredictedBlocks(o);
          let now = 0;
          for (const s of steps) {
            now += s.dt;
            const w = WORKERS[s.worker]!;
            const keys = keysOf(s.shared, s.own, s.seed);
            switch (s.op) {
              case "record":
                // Half the records start past a reported depth (`from`).
                p.record(w, keys, now, s.from);
                ref.record(w, keys, now, s.from);
                break;
              case "match":
                expect(p.match(keys, now)).toEqual(ref.match(keys, now));
                break;
              case "confirm": {
                // A lookup with the engine's reports: `count` blocks on `w`, `from` elsewhere.
                const depth = (x: typeof w) => (x === w ? s.count : s.from);
                expect(p.matchBeyond(keys, now, depth)).toEqual(ref.matchBeyond(keys, now, depth));
                break;
              }
              case "expire":
                p.expire(now);
                ref.expire(now);
                break;
              case "degrade":
                p.setDegraded(w, s.capacity);
                ref.setDegraded(w, s.capacity);
                break;
              case "heal":
                p.setHealthy(w);
                ref.setHealthy(w);
                break;
              case "clear":
                p.clearWorker(w);
                ref.clearWorker(w);
                break;
              default:
                p.removeWorker(w);
                ref.removeWorker(w);
            }
            for (const x of WORKERS) {
              expect(p.size(x)).toBe(ref.size(x));
              expect(p.routed(x)).toBe(ref.routed(x));
              expect(p.isDegraded(x)).toBe(ref.isDegraded(x));
            }
            // The reference has no `withdraw` (nothing here withdraws: 0).
            expect(p.stats()).toEqual({ ...ref.stats(), withdrawn: 0 });
          }
        },
      ),
      { numRuns: 400 },
    );
  });

  it("a prompt routed again and again to one worker keeps one entry per block", () => {
    const p = new PredictedBlocks({ ttlMs: 60_000, maxBlocksPerWorker: 10_000, degradedTtlMs: 0 });
    const keys = keysOf(500, 50, 1);
    for (let t = 0; t < 2000; t++) {
      p.record(WORKERS[0]!, keys, t);
      // Every other time, the engine has reported the first 500 blocks meanwhile.
      if (t % 2 === 0) p.matchBeyond(keys, t, () => 500);
    }
    expect(p.size(WORKERS[0]!)).toBe(550);
    expect(p.match(keys, 2000).get(WORKERS[0]!)).toBe(550);
  });
});
