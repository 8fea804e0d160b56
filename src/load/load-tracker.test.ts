import { describe, expect, it } from "vitest";
import { workerKey } from "../protocol/worker.js";
import { LoadTracker, validateSnapshot } from "./load-tracker.js";
import type { LoadSnapshot } from "./types.js";

const A = workerKey("a");
const snap = (over: Partial<LoadSnapshot> = {}): LoadSnapshot => ({
  running: 1,
  waiting: 0,
  kvUsage: 0.5,
  atMs: 0,
  ...over,
});

describe("LoadTracker", () => {
  it("reports unknown for a worker it never heard of", () => {
    const t = new LoadTracker({ staleAfterMs: 1000 });
    expect(t.state(A, 1e9)).toBe("unknown");
    expect(t.isStale(A, 1e9)).toBe(false);
    expect(t.view(A, 0)).toMatchObject({ state: "unknown", stale: false, snapshot: null });
  });

  it("goes stale staleAfterMs after the last success, and fresh again on the next one", () => {
    const t = new LoadTracker({ staleAfterMs: 1000 });
    t.update(A, snap({ atMs: 100 }), 100);
    expect(t.state(A, 1099)).toBe("fresh");
    t.recordFailure(A, "ECONNREFUSED", 500);
    t.recordFailure(A, "timeout", 900);
    expect(t.state(A, 1099)).toBe("fresh");
    expect(t.state(A, 1100)).toBe("stale");
    const v = t.view(A, 1100);
    expect(v).toMatchObject({
      stale: true,
      lastError: "timeout",
      consecutiveFailures: 2,
      totalFailures: 2,
      totalSuccesses: 1,
      lastSuccessMs: 100,
      source: "scrape",
    });
    expect(v.snapshot?.kvUsage).toBe(0.5);
    t.update(A, snap({ kvUsage: 0.7, atMs: 1200 }), 1200, "push");
    expect(t.view(A, 1200)).toMatchObject({
      state: "fresh",
      consecutiveFailures: 0,
      source: "push",
    });
  });

  it("counts a worker whose first answer is pending as pending until staleAfterMs", () => {
    const t = new LoadTracker({ staleAfterMs: 1000 });
    t.track(A, 5000);
    expect(t.state(A, 5999)).toBe("pending");
    expect(t.isStale(A, 5999)).toBe(false);
    expect(t.view(A, 5999)).toMatchObject({ state: "pending", stale: false });
    expect(t.state(A, 6000)).toBe("stale");
    t.forget(A);
    expect(t.state(A, 6000)).toBe("unknown");
  });

  it("counts a worker whose scrapes have only failed as stale at once, fresh on a success", () => {
    const t = new LoadTracker({ staleAfterMs: 1000 });
    t.track(A, 5000);
    t.recordFailure(A, "ECONNREFUSED", 5010);
    expect(t.state(A, 5010)).toBe("stale");
    expect(t.isStale(A, 5010)).toBe(true);
    t.update(A, snap({ atMs: 5100 }), 5100);
    expect(t.state(A, 5100)).toBe("fresh");
    // Once it has succeeded, a failure only matters after staleAfterMs without success.
    t.recordFailure(A, "timeout", 5200);
    expect(t.state(A, 5200)).toBe("fresh");
    expect(t.state(A, 6100)).toBe("stale");
  });

  it("refuses invalid snapshots, naming the field", () => {
    const t = new LoadTracker({ staleAfterMs: 1000 });
    expect(() => t.update(A, snap({ kvUsage: 1.5 }), 0)).toThrow(/kvUsage/);
    expect(validateSnapshot(snap({ waiting: -1 }))).toMatch(/waiting/);
    expect(validateSnapshot(snap({ running: Number.NaN }))).toMatch(/running/);
    expect(validateSnapshot(snap())).toBeNull();
    expect(t.state(A, 0)).toBe("unknown");
  });

  it("rejects a non-positive staleness", () => {
    expect(() => new LoadTracker({ staleAfterMs: 0 })).toThrow(RangeError);
  });

  it("an unreachable worker is stale at once, until its signal clears or a success", () => {
    const t = new LoadTracker({ staleAfterMs: 5000 });
    t.track(A, 0);
    t.update(A, { running: 0, waiting: 0, kvUsage: 0.1, atMs: 0 }, 0);
    expect(t.markUnreachable(A, "events", "disconnected", 10)).toBe(true);
    expect(t.markUnreachable(A, "scrape", "ECONNREFUSED", 11)).toBe(false);
    expect(t.isStale(A, 12)).toBe(true);
    expect(t.view(A, 12)).toMatchObject({
      state: "stale",
      unreachable: "events: disconnected; scrape: ECONNREFUSED",
      unreachableSinceMs: 10,
      timesUnreachable: 1,
    });
    t.markReachable(A, "events");
    expect(t.isStale(A, 13)).toBe(true); // the scrape has not answered yet
    t.update(A, { running: 0, waiting: 0, kvUsage: 0.1, atMs: 14 }, 14);
    expect(t.view(A, 14)).toMatchObject({ state: "fresh", unreachable: null });
    expect(t.markUnreachable(A, "caller", "refused", 15)).toBe(true);
    t.markReachable(A, "caller");
    expect(t.isStale(A, 16)).toBe(false);
    expect(t.markUnreachable(workerKey("unknown", 0), "caller", "x", 0)).toBe(false);
    // A scrape that started before the disconnect and answered after it clears nothing.
    t.markUnreachable(A, "events", "disconnected", 20);
    t.update(A, { running: 0, waiting: 0, kvUsage: 0.1, atMs: 18 }, 21);
    expect(t.view(A, 21)).toMatchObject({ stale: true, unreachable: "events: disconnected" });
    t.update(A, { running: 0, waiting: 0, kvUsage: 0.1, atMs: 22 }, 23);
    expect(t.view(A, 23).unreachable).toBeNull();
  });
});
