import { describe, expect, it } from "vitest";
import type { PhaseResult, RequestRecord } from "./run-phase.js";
import { formatComparison, percentile, summarise } from "./summary.js";

const rec = (worker: string, prompt: number, cached: number, ttft: number): RequestRecord => ({
  conversation: 0,
  turn: 0,
  worker,
  promptTokens: prompt,
  cachedTokens: cached,
  predictedCachedTokens: null,
  ttftMs: ttft,
  e2eMs: ttft + 100,
  routeMs: null,
});

describe("percentile", () => {
  it("uses the nearest rank", () => {
    const xs = Array.from({ length: 100 }, (_, i) => 100 - i);
    expect(percentile(xs, 0.99)).toBe(99);
    expect(percentile(xs, 0.5)).toBe(50);
    expect(percentile([7], 0.99)).toBe(7);
    expect(percentile([], 0.99)).toBe(0);
  });
});

describe("summarise", () => {
  const result: PhaseResult = {
    policy: "round-robin",
    records: [rec("a", 100, 50, 10), rec("b", 300, 250, 30), rec("a", 100, 0, 20)],
    errors: ["x"],
    wallMs: 1234,
  };

  it("weights the hit rate by tokens and lists idle workers", () => {
    const s = summarise(result, ["a", "b", "c"]);
    expect(s.hitRate).toBeCloseTo(300 / 500);
    expect(s.requestsPerWorker).toEqual({ a: 2, b: 1, c: 0 });
    expect(s.ttftMeanMs).toBeCloseTo(20);
    expect(s.ttftP99Ms).toBe(30);
    expect(s.errors).toBe(1);
    expect(s.routeMeanMs).toBeNull();
    expect(s.predictedHitRate).toBeNull();
  });

  it("formats both policies side by side, one row per worker", () => {
    const s = summarise(result, ["a", "b", "c"]);
    const table = formatComparison({ ...s, policy: "kv" }, s);
    expect(table).toContain("60.0 %");
    expect(table.split("\n").filter((l) => l.includes("requests on "))).toHaveLength(3);
  });
});
