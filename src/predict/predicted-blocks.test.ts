import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { computeBlockKeys } from "../index/block-key.js";
import { workerKey } from "../protocol/worker.js";
import { PredictedBlocks } from "./predicted-blocks.js";

const BS = 4;
const A = workerKey("a");
const B = workerKey("b");
const keysOf = (n: number, seed = 1) =>
  computeBlockKeys(
    Array.from({ length: n * BS }, (_, i) => seed * 100_000 + i),
    BS,
    null,
  );
const opts = { ttlMs: 2000, maxBlocksPerWorker: 1000, degradedTtlMs: 60_000 };

describe("PredictedBlocks", () => {
  it("counts a routed prompt's leading blocks as held by its worker until the TTL passes", () => {
    const p = new PredictedBlocks(opts);
    p.record(A, keysOf(8), 1000);
    expect(p.match(keysOf(12), 1000)).toEqual(new Map([[A, 8]]));
    expect(p.match(keysOf(5), 2999)).toEqual(new Map([[A, 5]]));
    expect(p.match(keysOf(12, 2), 1000).size).toBe(0);
    expect(p.match(keysOf(12), 3000).size).toBe(0);
    expect(p.stats()).toMatchObject({ blocks: 0, expired: 8 });
  });

  it("withdraws what one record made, keeping keys recorded again since and other workers'", () => {
    const p = new PredictedBlocks(opts);
    const first = p.record(A, keysOf(8), 0);
    p.record(B, keysOf(8), 0);
    // A later request shares the first 5 blocks on A: those are its record now.
    p.record(A, keysOf(5), 10);
    p.withdraw(A, keysOf(8), first);
    expect(p.match(keysOf(8), 20)).toEqual(
      new Map([
        [A, 5],
        [B, 8],
      ]),
    );
    expect(p.stats()).toMatchObject({ blocks: 13, withdrawn: 3 });
    // Again, or with a stamp no record made: nothing more goes.
    p.withdraw(A, keysOf(8), first);
    p.withdraw(A, keysOf(8), 0);
    expect(p.stats().withdrawn).toBe(3);
    // A withdrawn key recorded anew counts again.
    p.record(A, keysOf(8), 30);
    expect(p.match(keysOf(8), 40).get(A)).toBe(8);
  });

  it("drops confirmed blocks, a removed worker's blocks, and keeps to the cap (counted)", () => {
    const p = new PredictedBlocks({ ...opts, maxBlocksPerWorker: 10 });
    p.record(A, keysOf(6), 0);
    p.confirm(A, keysOf(6), 4);
    expect(p.size(A)).toBe(2);
    expect(p.stats().confirmed).toBe(4);
    p.record(B, keysOf(8, 3), 0);
    p.record(B, keysOf(8, 4), 1);
    expect(p.size(B)).toBe(10);
    expect(p.stats().evicted).toBe(6);
    // The newest prompt is whole; the oldest lost its head, so it no longer matches.
    expect(p.match(keysOf(8, 4), 2).get(B)).toBe(8);
    expect(p.match(keysOf(8, 3), 2).get(B)).toBeUndefined();
    p.removeWorker(B);
    expect(p.size(B)).toBe(0);
  });

  it("degraded mode keeps entries longer, capped at capacity, and clears them on recovery", () => {
    const p = new PredictedBlocks(opts);
    p.setDegraded(A, 6);
    p.record(A, keysOf(8), 0);
    expect(p.size(A)).toBe(6);
    p.record(A, keysOf(4, 2), 0);
    expect(p.match(keysOf(4, 2), 50_000).get(A)).toBe(4);
    p.confirm(A, keysOf(4, 2), 4); // degraded: the approximate view stays whole
    expect(p.size(A)).toBe(6);
    p.setHealthy(A);
    expect(p.size(A)).toBe(0);
    expect(p.match(keysOf(4, 2), 50_000).size).toBe(0);
    expect(p.isDegraded(A)).toBe(false);
  });

  it("rejects a bad option by name", () => {
    expect(() => new PredictedBlocks({ ...opts, ttlMs: -1 })).toThrow(/ttlMs/);
  });

  it("property: no predicted block ever counts past its TTL, under any interleaving", () => {
    // The time model: a sequence of steps, each advancing time and then recording,
    // matching, confirming, withdrawing an earlier record, sweeping or switching modes. A
    // reference log keeps, per worker and prompt block, the last time it was recorded, the
    // TTL that applied and which record it was (a withdrawn record's blocks are gone).
    const step = fc.record({
      dt: fc.integer({ min: 0, max: 1500 }),
      op: fc.constantFrom("record", "match", "confirm", "withdraw", "expire", "degrade", "heal"),
      worker: fc.constantFrom(A, B),
      prompt: fc.integer({ min: 0, max: 4 }),
      blocks: fc.integer({ min: 1, max: 6 }),
    });
    fc.assert(
      fc.property(fc.array(step, { minLength: 20, maxLength: 60 }), (steps) => {
        const p = new PredictedBlocks({ ttlMs: 2000, maxBlocksPerWorker: 12, degradedTtlMs: 5000 });
        const lastLive = new Map<string, number>(); // `${worker}/${prompt}/${block}` → expiresAt
        const lastStamp = new Map<string, number>(); // the same keys → the record's stamp
        const records: { worker: typeof A; keys: ReturnType<typeof keysOf>; stamp: number }[] = [];
        let now = 0;
        for (const s of steps) {
          now += s.dt;
          const keys = keysOf(s.blocks, s.prompt);
          if (s.op === "record") {
            const ttl = p.isDegraded(s.worker) ? 5000 : 2000;
            const stamp = p.record(s.worker, keys, now);
            records.push({ worker: s.worker, keys, stamp });
            for (let i = 0; i < s.blocks; i++) {
              lastLive.set(`${s.worker}/${s.prompt}/${i}`, now + ttl);
              lastStamp.set(`${s.worker}/${s.prompt}/${i}`, stamp);
            }
          } else if (s.op === "withdraw" && records.length > 0) {
            // One of the last two records: older ones have mostly expired.
            const r = records[Math.max(0, records.length - 1 - (s.blocks % 2))]!;
            p.withdraw(r.worker, r.keys, r.stamp);
            for (const [k, st] of lastStamp) {
              if (st === r.stamp) {
                lastLive.delete(k);
                lastStamp.delete(k);
              }
            }
          } else if (s.op === "match") {
            const m = p.match(keys, now);
            for (const [w, n] of m) {
              expect(n).toBeLessThanOrEqual(s.blocks);
              for (let i = 0; i < n; i++) {
                const exp = lastLive.get(`${w}/${s.prompt}/${i}`);
                expect(exp).toBeDefined();
                expect(now).toBeLessThan(exp!);
              }
            }
          } else if (s.op === "confirm") p.confirm(s.worker, keys, s.blocks);
          else if (s.op === "expire") p.expire(now);
          else if (s.op === "degrade") p.setDegraded(s.worker, 12);
          else p.setHealthy(s.worker);
          expect(p.size(A)).toBeLessThanOrEqual(12);
          expect(p.size(B)).toBeLessThanOrEqual(12);
        }
      }),
      { numRuns: 300 },
    );
  });
});

describe("PredictedBlocks.clearWorker", () => {
  it("drops a cleared engine's predictions but keeps its route count", () => {
    const p = new PredictedBlocks(opts);
    p.record(A, keysOf(3), 0);
    p.clearWorker(A);
    expect(p.size(A)).toBe(0);
    expect(p.routed(A)).toBe(1);
    expect(p.match(keysOf(3), 1).size).toBe(0);
  });
});

describe("PredictedBlocks memory", () => {
  it("stays within a constant factor of the cap under a confirm-everything load, and shrinks once all expire", () => {
    const cap = 1000;
    const ttl = 2000;
    const p = new PredictedBlocks({ ttlMs: ttl, maxBlocksPerWorker: cap, degradedTtlMs: 1 });
    // One prompt whose blocks the engine never reports (an aborted request) stays live at
    // the queue's front for the whole TTL.
    p.record(A, keysOf(10, 1), 0);
    let maxQueue = 0;
    let maxEntries = 0;
    // Each ms a new 50-block prompt is routed to A and the engine then reports it all:
    // 100k records within one TTL, almost none of them live.
    for (let t = 1; t < ttl; t++) {
      const keys = keysOf(50, t + 1);
      p.record(A, keys, t);
      p.confirm(A, keys, 50);
      const f = p.footprint(A);
      maxQueue = Math.max(maxQueue, f.queue);
      maxEntries = Math.max(maxEntries, f.entries);
    }
    expect(p.size(A)).toBe(10);
    expect(maxQueue).toBeLessThanOrEqual(16 * cap);
    expect(maxEntries).toBeLessThanOrEqual(16 * cap);
    // A burst of live entries grows the queue; once they all expire it is small again.
    for (let i = 0; i < 40; i++) p.record(A, keysOf(50, 10_000 + i), ttl);
    expect(p.size(A)).toBe(cap);
    expect(p.footprint(A).queue).toBeLessThanOrEqual(16 * cap);
    p.expire(3 * ttl);
    expect(p.size(A)).toBe(0);
    expect(p.footprint(A)).toEqual({ queue: 1024, entries: 0 });
  });
});
