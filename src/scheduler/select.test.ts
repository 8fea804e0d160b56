import { describe, expect, it } from "vitest";
import { selectCandidate } from "./select.js";
import { seededRng } from "./test-helpers.js";

const all = (n: number) => new Array<boolean>(n).fill(true);

describe("selectCandidate", () => {
  it("temperature 0 picks the lowest cost, skipping ineligible ones", () => {
    const s = selectCandidate([5, 1, 3], all(3), 0, () => 0.99);
    expect(s).toEqual({ index: 1, probabilities: [0, 1, 0], tie: false });
    expect(selectCandidate([5, 1, 3], [true, false, true], 0, () => 0).index).toBe(2);
  });

  it("breaks ties at random, uniformly", () => {
    expect(selectCandidate([2, 1, 1, 1], all(4), 0, () => 0).index).toBe(1);
    expect(selectCandidate([2, 1, 1, 1], all(4), 0, () => 0.999).index).toBe(3);
    const rng = seededRng(7);
    const counts = [0, 0, 0, 0];
    for (let i = 0; i < 3000; i++) counts[selectCandidate([2, 1, 1, 1], all(4), 0, rng).index]!++;
    expect(counts[0]).toBe(0);
    // 1000 expected each; 5 sigma ≈ 130
    for (const c of counts.slice(1)) expect(Math.abs(c - 1000)).toBeLessThan(130);
  });

  it("temperature > 0 samples from a softmax over min-max normalised costs", () => {
    const costs = [10, 20, 30];
    const s = selectCandidate(costs, all(3), 0.5, () => 0);
    // normalised 0, 0.5, 1 → weights e^0, e^-1, e^-2
    const z = 1 + Math.exp(-1) + Math.exp(-2);
    expect(s.probabilities[0]).toBeCloseTo(1 / z, 12);
    expect(s.probabilities[1]).toBeCloseTo(Math.exp(-1) / z, 12);
    expect(s.probabilities[2]).toBeCloseTo(Math.exp(-2) / z, 12);
    // Scale invariance: the same shape for costs ×100.
    const big = selectCandidate([1000, 2000, 3000], all(3), 0.5, () => 0);
    expect(big.probabilities[2]).toBeCloseTo(s.probabilities[2]!, 12);
  });

  it("sampling frequencies follow the probabilities (seeded)", () => {
    const rng = seededRng(42);
    const costs = [10, 20, 30, 15];
    const n = 20_000;
    const counts = [0, 0, 0, 0];
    let probs: ArrayLike<number> = [];
    for (let i = 0; i < n; i++) {
      const s = selectCandidate(costs, all(4), 1, rng);
      counts[s.index]!++;
      probs = s.probabilities;
    }
    for (let i = 0; i < 4; i++) {
      const expected = probs[i]! * n;
      const sigma = Math.sqrt(n * probs[i]! * (1 - probs[i]!));
      expect(Math.abs(counts[i]! - expected)).toBeLessThan(5 * sigma);
    }
    // The cheapest is chosen most and the dearest least, but not always.
    expect(counts[0]).toBeGreaterThan(counts[3]!);
    expect(counts[3]).toBeGreaterThan(counts[2]!);
    expect(counts[2]).toBeGreaterThan(0);
  });

  it("higher temperature spreads choices more", () => {
    const spread = (t: number) => selectCandidate([0, 1], all(2), t, () => 0).probabilities[1]!;
    expect(spread(0.1)).toBeLessThan(spread(1));
    expect(spread(1)).toBeLessThan(spread(10));
    expect(spread(10)).toBeLessThan(0.5);
  });

  it("throws when nothing is eligible", () => {
    expect(() => selectCandidate([1], [false], 0, () => 0)).toThrow(RangeError);
  });

  it("is a total order on non-finite costs: finite beats infinite, all-infinite ties", () => {
    const rng = () => 0.99;
    for (const t of [0, 0.5]) {
      expect(selectCandidate([Infinity, 5, Number.NaN], [true, true, true], t, rng).index).toBe(1);
      const all = selectCandidate([Infinity, Number.NaN, Infinity], [true, true, true], t, rng);
      expect(all.tie).toBe(true);
      expect(all.probabilities).toEqual([1 / 3, 1 / 3, 1 / 3]);
      expect(all.index).toBe(2);
      const sampled = selectCandidate([1, 2, Infinity], [true, true, true], t, () => 0.999);
      expect(sampled.probabilities[2]).toBe(0);
      expect(sampled.index).not.toBe(2);
    }
  });
});
