import { describe, expect, it } from "vitest";
import { workerKey } from "../protocol/worker.js";
import { fleetLoadStats, meanStd, meanStdOf } from "./fleet-stats.js";
import { LoadTracker } from "./load-tracker.js";

describe("meanStd", () => {
  it("computes the mean and the sample standard deviation (n − 1)", () => {
    const r = meanStd([0.2, 0.4, 0.6, 0.8]);
    expect(r.n).toBe(4);
    expect(r.mean).toBeCloseTo(0.5, 12);
    // Σ(x−0.5)² = 0.2; / 3 → 0.0667; sqrt → 0.2582
    expect(r.std).toBeCloseTo(Math.sqrt(0.2 / 3), 12);
  });

  it("handles 0 and 1 values and skips nulls", () => {
    expect(meanStd([])).toEqual({ n: 0, mean: null, std: null });
    expect(meanStd([null, 0.3])).toEqual({ n: 1, mean: 0.3, std: 0 });
  });

  it("stays accurate for tightly clustered large values", () => {
    const r = meanStd([1e9 + 0.1, 1e9 + 0.2, 1e9 + 0.3]);
    expect(r.std).toBeCloseTo(0.1, 6);
  });
});

describe("fleetLoadStats", () => {
  it("meanStdOf over a typed array gives meanStd's numbers exactly", () => {
    let seed = 7;
    const next = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    for (let t = 0; t < 200; t++) {
      const n = Math.floor(next() * 40);
      const a = new Float64Array(n + 3).fill(5);
      for (let i = 0; i < n; i++) a[i] = next() < 0.2 ? Number.NaN : next();
      const list = [...a.subarray(0, n)].map((v) => (Number.isNaN(v) ? null : v));
      expect(meanStdOf(a, n)).toEqual(meanStd(list));
    }
  });

  it("aggregates fresh workers only", () => {
    const t = new LoadTracker({ staleAfterMs: 1000 });
    const [a, b, c, d] = ["a", "b", "c", "d"].map((id) => workerKey(id));
    t.update(a!, { running: 0, waiting: 0, kvUsage: 0.2, atMs: 0 }, 0);
    t.update(b!, { running: 0, waiting: 0, kvUsage: 0.6, atMs: 900 }, 900);
    t.update(c!, { running: 0, waiting: 0, kvUsage: 0.9, atMs: 0 }, 0);
    t.update(c!, { running: 0, waiting: 0, kvUsage: 0.4, atMs: 950 }, 950);
    const s = fleetLoadStats(t, [a!, b!, c!, d!], 1200);
    // a is stale (last success at 0), d unknown.
    expect(s).toMatchObject({ workers: 4, stale: 1, unknown: 1, n: 2 });
    expect(s.mean).toBeCloseTo(0.5, 12);
    expect(s.std).toBeCloseTo(Math.sqrt(0.02), 12);
  });
});
