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
    // A's engine reported the first 4: their predictions go, the 2 after them count on.
    expect(p.matchBeyond(keysOf(6), 0, (w) => (w === A ? 4 : 0)).get(A)).toBe(6);
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
    // Degraded: a report confirms nothing, the approximate view stays whole.
    p.matchBeyond(keysOf(4, 2), 50_000, () => 4);
    expect(p.size(A)).toBe(6);
    p.setHealthy(A);
    expect(p.size(A)).toBe(0);
    expect(p.match(keysOf(4, 2), 50_000).size).toBe(0);
    expect(p.isDegraded(A)).toBe(false);
  });

  it("matchBeyond: reads on from what the engine reported, confirming only the reported head", () => {
    // An agent's context: a 6-block system prompt shared by every task, then its own.
    const system = 6;
    const task = (own: number, seed: number) => {
      const tokens = [
        ...Array.from({ length: system * BS }, (_, i) => i),
        ...Array.from({ length: own * BS }, (_, i) => 1_000_000 + seed * 10_000 + i),
      ];
      return computeBlockKeys(tokens, BS, null);
    };
    const p = new PredictedBlocks(opts);
    p.record(A, task(10, 1), 0); // task 1's step: 16 blocks predicted on A
    const reportedSystem = (w: string) => (w === A ? system : 0);
    // Another task sharing only the system prompt, which A's engine reported: nothing is
    // predicted beyond the report, and the reported head's predictions are confirmed.
    expect(p.matchBeyond(task(4, 2), 10, reportedSystem).size).toBe(0);
    expect(p.stats()).toMatchObject({ confirmed: system, blocks: 10 });
    // Task 1's next step still matches its predicted context past the system prompt
    // (reading from key 0 alone, as `match` does, it would find nothing now).
    expect(p.matchBeyond(task(14, 1), 20, reportedSystem)).toEqual(new Map([[A, 16]]));
    expect(p.match(task(14, 1), 20).size).toBe(0);
    // Where the index holds less than the prediction, the whole predicted run counts
    // (its head is confirmed as far as the report goes).
    p.record(B, task(3, 3), 30);
    expect(p.matchBeyond(task(3, 3), 40, (w) => (w === B ? 2 : 0)).get(B)).toBe(9);
    expect(p.size(B)).toBe(7);
    // A report at or past the prediction's end: nothing beyond it, and the predictions
    // below the report are confirmed, walking down from it while they are live.
    expect(p.matchBeyond(task(3, 3), 40, (w) => (w === B ? 9 : 0)).has(B)).toBe(false);
    expect(p.size(B)).toBe(0);
    // So an eviction after the report cannot bring them back as a claim.
    expect(p.matchBeyond(task(3, 3), 45, (w) => (w === B ? 2 : 0)).has(B)).toBe(false);
    // A report covering a fresh prediction confirms it whole.
    p.record(B, task(3, 5), 50);
    expect(p.size(B)).toBe(9);
    expect(p.matchBeyond(task(3, 5), 60, (w) => (w === B ? 9 : 0)).has(B)).toBe(false);
    expect(p.size(B)).toBe(0);
    // Expired: nothing counts, whatever the depth.
    expect(p.matchBeyond(task(14, 1), 2000, reportedSystem).size).toBe(0);
    // Recorded past what the engine reported (`from`): only those keys are kept, and they
    // count read on from the report, not from key 0.
    p.record(B, task(4, 6), 2100, system);
    expect(p.size(B)).toBe(4);
    expect(p.match(task(4, 6), 2110).has(B)).toBe(false);
    expect(p.matchBeyond(task(4, 6), 2110, (w) => (w === B ? system : 0)).get(B)).toBe(10);
    // Degraded: the approximate view is read on the same way, nothing is confirmed, and a
    // record keeps the whole prompt (the view must stand without the index).
    p.setDegraded(A, 100);
    p.record(A, task(10, 4), 3000, system);
    expect(p.matchBeyond(task(10, 4), 3010, reportedSystem).get(A)).toBe(16);
    expect(p.size(A)).toBe(16);
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
      // Leading blocks the engine reported (`matchBeyond`; 0 = `match`).
      depth: fc.integer({ min: 0, max: 6 }),
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
            const depth = (w: string) => (w === s.worker ? s.depth : 0);
            const m = s.depth === 0 ? p.match(keys, now) : p.matchBeyond(keys, now, depth);
            for (const [w, n] of m) {
              expect(n).toBeLessThanOrEqual(s.blocks);
              expect(n).toBeGreaterThan(depth(w));
              // What it claims past the report was recorded there and has not expired.
              for (let i = Math.min(depth(w), s.blocks); i < n; i++) {
                const exp = lastLive.get(`${w}/${s.prompt}/${i}`);
                expect(exp).toBeDefined();
                expect(now).toBeLessThan(exp!);
              }
            }
          } else if (s.op === "confirm") {
            // The engine reported the prompt in full on the worker.
            p.matchBeyond(keys, now, (w) => (w === s.worker ? s.blocks : 0));
          } else if (s.op === "expire") p.expire(now);
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

describe("PredictedBlocks when the clock steps back", () => {
  it("never counts a prediction for longer than its TTL from now", () => {
    const p = new PredictedBlocks(opts);
    p.record(A, keysOf(8), 10_000);
    // The wall clock steps back 5 s (an NTP correction): the prediction made at 10 s would
    // otherwise count until the clock reads 12 s again, 7 s from now.
    expect(p.match(keysOf(8), 5_000).size).toBe(0);
    expect(p.matchBeyond(keysOf(8), 5_000, () => 0).size).toBe(0);
    // Recorded again after the step: counted for its TTL as usual.
    p.record(A, keysOf(8), 5_000);
    expect(p.match(keysOf(8), 6_999)).toEqual(new Map([[A, 8]]));
    expect(p.match(keysOf(8), 7_000).size).toBe(0);
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
      p.matchBeyond(keys, t, (w) => (w === A ? 50 : 0));
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
