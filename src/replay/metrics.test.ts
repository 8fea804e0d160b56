import { describe, expect, it } from "vitest";
import { imbalance, percentile, summariseLatency } from "./metrics.js";

describe("metrics", () => {
  it("takes nearest-rank percentiles", () => {
    const s = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
    expect(percentile(s, 50)).toBe(5);
    expect(percentile(s, 99)).toBe(10);
    expect(percentile(s, 0)).toBe(1);
    expect(percentile([], 50)).toBeNaN();
  });

  it("summarises latencies in any order", () => {
    const l = summariseLatency([30, 10, 20]);
    expect(l).toEqual({ mean: 20, p50: 20, p90: 30, p99: 30, max: 30 });
  });

  it("measures imbalance as max over mean", () => {
    expect(imbalance([10, 10, 10, 10])).toBe(1);
    expect(imbalance([30, 10, 10, 10])).toBe(2);
    expect(imbalance([0, 0])).toBe(1);
  });
});
