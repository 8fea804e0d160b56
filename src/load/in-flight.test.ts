import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { workerKey } from "../protocol/worker.js";
import { InFlightTracker } from "./in-flight.js";

const A = workerKey("a");
const B = workerKey("b");

const tracker = () => new InFlightTracker({ prefillTtlMs: 1000, ttlMs: 5000 });

describe("InFlightTracker", () => {
  it("adds prefill until first token and blocks until done", () => {
    const t = tracker();
    expect(t.add("r1", A, { prefillTokens: 100, blocks: 8, nowMs: 0 })).toEqual({ ok: true });
    t.add("r2", A, { prefillTokens: 50, blocks: 4, nowMs: 1 });
    t.add("r3", B, { prefillTokens: 10, blocks: 1, nowMs: 2 });
    expect({ ...t.totals(A) }).toEqual({
      pendingPrefillTokens: 150,
      pendingRequests: 2,
      activeBlocks: 12,
      activeRequests: 2,
    });
    expect(t.firstToken("r1", 10)).toEqual({ ok: true, worker: A, requestId: "r1" });
    expect({ ...t.totals(A) }).toEqual({
      pendingPrefillTokens: 50,
      pendingRequests: 1,
      activeBlocks: 12,
      activeRequests: 2,
    });
    // A second first-token report changes nothing.
    t.firstToken("r1", 11);
    expect(t.totals(A).pendingPrefillTokens).toBe(50);
    expect(t.done("r1", 20)).toEqual({ ok: true, worker: A, requestId: "r1" });
    expect(t.totals(A).activeBlocks).toBe(4);
    // done without first token also clears the pending prefill
    t.done("r2", 21);
    expect({ ...t.totals(A) }).toEqual({
      pendingPrefillTokens: 0,
      pendingRequests: 0,
      activeBlocks: 0,
      activeRequests: 0,
    });
    expect(t.totals(B).activeRequests).toBe(1);
    expect(t.size).toBe(1);
  });

  it("answers unknown request ids distinguishably and refuses duplicates", () => {
    const t = tracker();
    expect(t.done("nope", 0)).toEqual({ ok: false, reason: "unknown_request", requestId: "nope" });
    expect(t.firstToken("nope", 0)).toEqual({
      ok: false,
      reason: "unknown_request",
      requestId: "nope",
    });
    t.add("r", A, { prefillTokens: 1, blocks: 1, nowMs: 0 });
    expect(t.add("r", B, { prefillTokens: 1, blocks: 1, nowMs: 0 })).toEqual({
      ok: false,
      reason: "duplicate_request",
      requestId: "r",
    });
    t.done("r", 1);
    expect(t.done("r", 2).ok).toBe(false);
  });

  it("expires the prefill after prefillTtlMs and the request after ttlMs", () => {
    const t = tracker();
    t.add("r1", A, { prefillTokens: 100, blocks: 8, nowMs: 0 });
    t.add("r2", A, { prefillTokens: 30, blocks: 2, nowMs: 600 });
    expect(t.expire(999)).toBe(0);
    expect(t.totals(A).pendingPrefillTokens).toBe(130);
    expect(t.expire(1000)).toBe(0);
    expect(t.totals(A).pendingPrefillTokens).toBe(30);
    expect(t.totals(A).activeBlocks).toBe(10);
    expect(t.expire(1600)).toBe(0);
    expect(t.totals(A).pendingPrefillTokens).toBe(0);
    expect(t.expired.prefills).toBe(2);
    expect(t.expire(5000)).toBe(1);
    expect(t.has("r1")).toBe(false);
    expect(t.totals(A).activeBlocks).toBe(2);
    expect(t.expire(5600)).toBe(1);
    expect(t.totals(A).activeRequests).toBe(0);
    expect(t.expired.requests).toBe(2);
    expect(t.done("r2", 6000).ok).toBe(false);
  });

  it("does not expire a finished request that reused an id later", () => {
    const t = tracker();
    t.add("r", A, { prefillTokens: 10, blocks: 1, nowMs: 0 });
    t.done("r", 10);
    t.add("r", B, { prefillTokens: 20, blocks: 2, nowMs: 4000 });
    // The old entry's TTL passes; the new one with the same id must stay.
    expect(t.expire(5000)).toBe(0);
    expect(t.has("r")).toBe(true);
    expect(t.totals(B)).toMatchObject({ activeRequests: 1, activeBlocks: 2 });
    expect(t.expire(9000)).toBe(1);
  });

  it("keeps totals of requests routed after a given time", () => {
    const t = tracker();
    t.add("old", A, { prefillTokens: 100, blocks: 10, nowMs: 100 });
    t.add("new1", A, { prefillTokens: 20, blocks: 2, nowMs: 300 });
    expect({ ...t.totalsSince(A, 200) }).toEqual({
      pendingPrefillTokens: 20,
      pendingRequests: 1,
      activeBlocks: 2,
      activeRequests: 1,
    });
    // Incremental updates for the same `since`.
    t.add("new2", A, { prefillTokens: 5, blocks: 1, nowMs: 400 });
    t.firstToken("new1", 410);
    t.done("old", 420);
    expect({ ...t.totalsSince(A, 200) }).toEqual({
      pendingPrefillTokens: 5,
      pendingRequests: 1,
      activeBlocks: 3,
      activeRequests: 2,
    });
    // A request routed exactly at the snapshot time is not known to be in it: it counts
    // as newer (a burst routed in the scrape's millisecond must not vanish until the next).
    expect(t.totalsSince(A, 400).activeRequests).toBe(1);
    expect(t.totalsSince(A, 401).activeRequests).toBe(0);
    expect(t.totalsSince(A, 0).activeRequests).toBe(2);
    expect(t.totalsSince(B, 0).activeRequests).toBe(0);
  });

  it("forgets a removed worker's requests", () => {
    const t = tracker();
    t.add("x", A, { prefillTokens: 1, blocks: 1, nowMs: 0 });
    t.add("y", B, { prefillTokens: 1, blocks: 1, nowMs: 0 });
    expect(t.removeWorker(A)).toBe(1);
    expect(t.has("x")).toBe(false);
    expect(t.workers()).toEqual([B]);
    expect(t.expire(10_000)).toBe(1);
  });

  it("rejects inconsistent TTLs", () => {
    expect(() => new InFlightTracker({ prefillTtlMs: 10, ttlMs: 5 })).toThrow(RangeError);
    expect(() => new InFlightTracker({ prefillTtlMs: 0, ttlMs: 5 })).toThrow(RangeError);
  });
});

describe("InFlightTracker.totalsSince", () => {
  it("agrees with a brute-force sum over random adds, reports, expiries and snapshot times", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            op: fc.constantFrom("add", "add", "first", "done", "since", "since", "expire", "drop"),
            w: fc.nat(2),
            r: fc.nat(30),
            dt: fc.integer({ min: -3, max: 20 }),
            n: fc.nat(50),
          }),
          { maxLength: 200 },
        ),
        (ops) => {
          const t = new InFlightTracker({ prefillTtlMs: 40, ttlMs: 120 });
          const keys = [A, B, workerKey("c")];
          const model = new Map<
            string,
            { w: number; at: number; tok: number; blk: number; pending: boolean }
          >();
          let now = 0;
          let clock = -Infinity;
          for (const { op, w, r, dt, n } of ops) {
            now += dt; // the wall clock may step back a little
            const id = `r${r}`;
            if (op === "add" && !model.has(id)) {
              t.add(id, keys[w]!, { prefillTokens: n, blocks: n % 7, nowMs: now });
              clock = Math.max(clock, now);
              model.set(id, { w, at: clock, tok: n, blk: n % 7, pending: true });
            } else if (op === "first" && model.has(id)) {
              t.firstToken(id, now);
              model.get(id)!.pending = false;
            } else if (op === "done") {
              t.done(id, now);
              model.delete(id);
            } else if (op === "expire") {
              t.expire(now);
              for (const [k, e] of model) {
                if (e.at + 40 <= now) e.pending = false;
                if (e.at + 120 <= now) model.delete(k);
              }
            } else if (op === "drop") {
              t.removeWorker(keys[w]!);
              for (const [k, e] of model) if (e.w === w) model.delete(k);
            } else if (op === "since") {
              const since = now - n;
              const want = {
                pendingPrefillTokens: 0,
                pendingRequests: 0,
                activeBlocks: 0,
                activeRequests: 0,
              };
              for (const e of model.values()) {
                if (e.w !== w || e.at < since) continue;
                if (e.pending) {
                  want.pendingPrefillTokens += e.tok;
                  want.pendingRequests++;
                }
                want.activeBlocks += e.blk;
                want.activeRequests++;
              }
              expect({ ...t.totalsSince(keys[w]!, since) }).toEqual(want);
            }
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it("costs what the snapshot time crosses, not the number of entries in flight", () => {
    // Ratio within one run (no absolute timing): 100× the entries, about the same cost.
    const cost = (entries: number): number => {
      const t = new InFlightTracker({ prefillTtlMs: 1e9, ttlMs: 1e9 });
      for (let i = 0; i < entries; i++) {
        t.add(`r${i}`, A, { prefillTokens: 1, blocks: 1, nowMs: i });
      }
      const t0 = performance.now();
      for (let s = 0; s < 2000; s++) t.totalsSince(A, s % 2 === 0 ? -1 : -2);
      return performance.now() - t0;
    };
    cost(2_000); // warm-up
    const small = Math.min(cost(2_000), cost(2_000));
    const large = Math.min(cost(200_000), cost(200_000));
    expect(large / Math.max(small, 0.05)).toBeLessThan(10);
  });

  it("pendingSharing: pending prefill of requests sharing the first n blocks", () => {
    const t = tracker();
    // Chained keys, two words per block: blocks [0, 1] shared, the third differs.
    const p = Uint32Array.of(1, 1, 2, 2, 3, 3);
    const q = Uint32Array.of(1, 1, 2, 2, 9, 9);
    t.add("p", A, { prefillTokens: 100, blocks: 3, nowMs: 0, prefixKeys: p });
    t.add("q", A, { prefillTokens: 40, blocks: 3, nowMs: 0, prefixKeys: q });
    t.add("short", A, { prefillTokens: 7, blocks: 1, nowMs: 0, prefixKeys: Uint32Array.of(1, 1) });
    t.add("nokeys", A, { prefillTokens: 5, blocks: 1, nowMs: 0 });
    t.add("b", B, { prefillTokens: 1000, blocks: 3, nowMs: 0, prefixKeys: p });
    expect(t.pendingSharing(A, p, 3)).toBe(100);
    expect(t.pendingSharing(A, p, 2)).toBe(140);
    expect(t.pendingSharing(A, p, 1)).toBe(147);
    // The empty prefix is shared by every pending request, with keys or without.
    expect(t.pendingSharing(A, p, 0)).toBe(152);
    // Blocks beyond the asking prompt: nothing can be known to share them.
    expect(t.pendingSharing(A, Uint32Array.of(1, 1), 2)).toBe(0);
    // Prefill done or request gone: no longer queued.
    t.firstToken("p", 1);
    t.done("q", 1);
    expect(t.pendingSharing(A, p, 2)).toBe(0);
    expect(t.pendingSharing(A, p, 1)).toBe(7);
    expect(t.pendingSharing(workerKey("none"), p, 1)).toBe(0);
  });
});

describe("InFlightTracker.prefillProgress", () => {
  const w = workerKey("w");
  const add = (t: InFlightTracker, id: string, tokens: number, nowMs: number) =>
    t.add(id, w, { prefillTokens: tokens, blocks: 1, nowMs });

  it("counts the oldest pending prefill from the later of its routing and the last first token", () => {
    const t = tracker();
    expect(t.prefillProgress(w, 0, 1000)).toBeNull();
    add(t, "a", 2000, 100); // routed to an idle worker: starts at once
    add(t, "b", 3000, 200); // queued behind a
    // At 1 token/ms after 20 ms of overhead: a has computed 600 of its 2,000 at 720 ms.
    expect(t.prefillProgress(w, 720, 1000, 20)).toEqual({ tokens: 600, routedMs: 100 });
    expect(t.prefillProgress(w, 5000, 1000)).toEqual({ tokens: 2000, routedMs: 100 }); // at most all
    expect(t.prefillProgress(w, 50, 1000)).toEqual({ tokens: 0, routedMs: 100 }); // never negative
    t.firstToken("a", 2120);
    // b started when a's first token came, not when it was routed.
    expect(t.prefillProgress(w, 2620, 1000)).toEqual({ tokens: 500, routedMs: 200 });
    // A request in decode is skipped; one that finished its prefill by TTL moves no clock.
    t.firstToken("b", 5120);
    add(t, "c", 4000, 6000);
    expect(t.prefillProgress(w, 6500, 1000)).toEqual({ tokens: 500, routedMs: 6000 });
    t.expire(7001);
    expect(t.prefillProgress(w, 7500, 1000)).toBeNull();
    add(t, "d", 4000, 7600);
    expect(t.prefillProgress(w, 7700, 1000)).toEqual({ tokens: 100, routedMs: 7600 });
    t.removeWorker(w);
    expect(t.prefillProgress(w, 7700, 1000)).toBeNull();
  });
});
