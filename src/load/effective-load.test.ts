import { describe, expect, it } from "vitest";
import { workerKey } from "../protocol/worker.js";
import { effectiveLoad } from "./effective-load.js";
import { InFlightTracker } from "./in-flight.js";
import type { LoadSnapshot } from "./types.js";

const A = workerKey("a");

describe("effectiveLoad (the combining rule)", () => {
  it("keeps a burst routed in the scrape's own millisecond on an idle worker", () => {
    // The scrape saw the worker idle at 3000; three requests were then routed to it in
    // that same millisecond. Taken as already seen, the engine would confirm none of
    // them and their prefill would vanish (the next request of the burst comes here too).
    const t = new InFlightTracker({ prefillTtlMs: 60_000, ttlMs: 600_000 });
    const snap: LoadSnapshot = { running: 0, waiting: 0, kvUsage: 0, atMs: 3000 };
    for (const id of ["b1", "b2", "b3"]) {
      t.add(id, A, { prefillTokens: 8000, blocks: 500, nowMs: 3000 });
    }
    const load = effectiveLoad(snap, t.totals(A), t.totalsSince(A, snap.atMs), 1000);
    expect(load.pendingPrefillTokens).toBe(24_000);
    expect(load.waiting).toBe(3);
  });

  it("adds only requests routed after the snapshot to the scraped counts", () => {
    const t = new InFlightTracker({ prefillTtlMs: 60_000, ttlMs: 600_000 });
    // Routed before the scrape: the engine already counts them.
    t.add("before1", A, { prefillTokens: 160, blocks: 10, nowMs: 1000 });
    t.add("before2", A, { prefillTokens: 32, blocks: 2, nowMs: 1500 });
    const snap: LoadSnapshot = {
      running: 1,
      waiting: 1,
      kvUsage: 0.12,
      numGpuBlocks: 100,
      atMs: 2000,
    };
    // Routed after: not yet visible in the scrape.
    t.add("after", A, { prefillTokens: 48, blocks: 3, nowMs: 2100 });
    const load = effectiveLoad(snap, t.totals(A), t.totalsSince(A, snap.atMs), null);
    expect(load).toEqual({
      // No engine reports pending prefill tokens: all predicted ones count.
      pendingPrefillTokens: 160 + 32 + 48,
      activeBlocks: 12 + 3,
      waiting: 1 + 1,
      running: 1,
      kvLoad: 0.15,
      confirmedKvLoad: 0.12,
      capacityBlocks: 100,
      basis: "scraped+predicted",
    });
    // Once the engine reports the request (next scrape), it is not counted twice.
    const next: LoadSnapshot = {
      running: 2,
      waiting: 1,
      kvUsage: 0.15,
      numGpuBlocks: 100,
      atMs: 2200,
    };
    const later = effectiveLoad(next, t.totals(A), t.totalsSince(A, next.atMs), null);
    expect(later.activeBlocks).toBe(15);
    expect(later.waiting).toBe(1);
  });

  it("uses predictions alone without a snapshot", () => {
    const t = new InFlightTracker({ prefillTtlMs: 60_000, ttlMs: 600_000 });
    t.add("r1", A, { prefillTokens: 64, blocks: 4, nowMs: 0 });
    t.add("r2", A, { prefillTokens: 16, blocks: 1, nowMs: 0 });
    t.firstToken("r2", 5);
    const all = t.totals(A);
    expect(effectiveLoad(null, all, all, 50)).toEqual({
      pendingPrefillTokens: 64,
      activeBlocks: 5,
      waiting: 1,
      running: 1,
      kvLoad: 0.1,
      confirmedKvLoad: null,
      capacityBlocks: 50,
      basis: "predicted",
    });
    expect(effectiveLoad(null, all, all, null).kvLoad).toBeNull();
  });

  it("falls back to predicted blocks and the scraped fraction when capacity is unknown", () => {
    const t = new InFlightTracker({ prefillTtlMs: 60_000, ttlMs: 600_000 });
    t.add("r", A, { prefillTokens: 0, blocks: 7, nowMs: 0 });
    const snap: LoadSnapshot = { running: 3, waiting: 0, kvUsage: 0.4, atMs: 10 };
    const load = effectiveLoad(snap, t.totals(A), t.totalsSince(A, 10), null);
    expect(load.activeBlocks).toBe(7);
    expect(load.kvLoad).toBe(0.4);
    // A configured capacity turns the fraction into blocks.
    expect(effectiveLoad(snap, t.totals(A), t.totalsSince(A, 10), 200).activeBlocks).toBe(80);
  });

  it("requests the engine never saw fade out at the next scrape", () => {
    // A client routes 100 requests to A and never sends them (nor reports them).
    const t = new InFlightTracker({ prefillTtlMs: 60_000, ttlMs: 600_000 });
    for (let i = 0; i < 100; i++) {
      t.add(`ghost-${i}`, A, { prefillTokens: 2048, blocks: 128, nowMs: 1000 + i });
    }
    // The engine reports 2 requests (real ones) at 2000.
    const snap: LoadSnapshot = { running: 1, waiting: 1, kvUsage: 0.1, atMs: 2000 };
    const load = effectiveLoad(snap, t.totals(A), t.totalsSince(A, snap.atMs), null);
    // At most the 2 requests the engine confirms keep their pending prefill (before: all
    // 100 × 2048 tokens for prefillTtlMs, and 12,800 blocks for ttlMs).
    expect(load.pendingPrefillTokens).toBeCloseTo(2 * 2048);
    expect(load.activeBlocks).toBeCloseTo(2 * 128);
    expect(load.confirmedKvLoad).toBe(0.1);
    // Requests routed since count in the share the engine confirmed of the older ones
    // (2 of 100): the client that never sends cannot inflate X between scrapes either.
    for (let i = 0; i < 50; i++) {
      t.add(`ghost-new-${i}`, A, { prefillTokens: 2048, blocks: 128, nowMs: 2500 });
    }
    const next = effectiveLoad(snap, t.totals(A), t.totalsSince(A, snap.atMs), 1000);
    expect(next.pendingPrefillTokens).toBeCloseTo(2 * 2048 + 50 * 2048 * 0.02);
    expect(next.waiting).toBeCloseTo(1 + 50 * 0.02);
    expect(next.activeBlocks).toBeCloseTo(0.1 * 1000 + 50 * 128 * 0.02);
    expect(next.confirmedKvLoad).toBe(0.1);
  });

  it("trusts newer predictions in full while the engine confirms the older ones", () => {
    const t = new InFlightTracker({ prefillTtlMs: 60_000, ttlMs: 600_000 });
    for (let i = 0; i < 10; i++) t.add(`old-${i}`, A, { prefillTokens: 64, blocks: 4, nowMs: 1 });
    const snap: LoadSnapshot = { running: 6, waiting: 4, kvUsage: 0.2, atMs: 10 };
    for (let i = 0; i < 5; i++) t.add(`new-${i}`, A, { prefillTokens: 64, blocks: 4, nowMs: 11 });
    const load = effectiveLoad(snap, t.totals(A), t.totalsSince(A, snap.atMs), 100);
    expect(load.waiting).toBe(4 + 5);
    expect(load.activeBlocks).toBeCloseTo(20 + 5 * 4);
    expect(load.pendingPrefillTokens).toBe(15 * 64);
  });
});
