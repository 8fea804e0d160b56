import { describe, expect, it } from "vitest";
import { candidateCost, newPrefillBlocks } from "./cost.js";
import { DEFAULT_WEIGHTS } from "./defaults.js";
import { cand } from "./test-helpers.js";
import type { CostWeights } from "./types.js";

const W: CostWeights = {
  prefill: 1,
  pending: 1,
  decode: 1,
  queue: 2,
  host: 0.25,
  disk: 0.5,
  store: 0.75,
};
const ov = (gpu: number, host: number, disk: number, store: number) => ({ gpu, host, disk, store });

describe("newPrefillBlocks", () => {
  it("charges GPU hits nothing and misses one block each", () => {
    expect(newPrefillBlocks(160, 10, 16, ov(0, 0, 0, 0), W)).toBe(10);
    expect(newPrefillBlocks(160, 10, 16, ov(4, 4, 4, 0), W)).toBe(6);
    expect(newPrefillBlocks(160, 10, 16, ov(10, 10, 10, 0), W)).toBe(0);
  });

  it("charges each tier its weight (tiers are cumulative)", () => {
    // 2 gpu, 3 host (0.25), 1 disk (0.5), 4 misses
    expect(newPrefillBlocks(160, 10, 16, ov(2, 5, 6, 0), W)).toBe(3 * 0.25 + 0.5 + 4);
  });

  it("takes the store where it is cheaper than the local tier", () => {
    // store covers 8 blocks: blocks 6..7 at 0.75 instead of 1; host/disk blocks stay cheaper
    expect(newPrefillBlocks(160, 10, 16, ov(2, 5, 6, 8), W)).toBe(3 * 0.25 + 0.5 + 2 * 0.75 + 2);
    // store alone
    expect(newPrefillBlocks(160, 10, 16, ov(0, 0, 0, 10), W)).toBe(7.5);
    // a store weight above a local tier's never makes the local block dearer
    const w = { ...W, store: 0.3 };
    expect(newPrefillBlocks(160, 10, 16, ov(0, 0, 4, 2), w)).toBeCloseTo(2 * 0.3 + 2 * 0.5 + 6, 12);
  });

  it("adds the partial tail block and clamps inconsistent overlaps", () => {
    expect(newPrefillBlocks(168, 10, 16, ov(10, 10, 10, 0), W)).toBe(0.5);
    expect(newPrefillBlocks(8, 0, 16, ov(0, 0, 0, 0), W)).toBe(0.5);
    // host < gpu is read as host = gpu; overlaps beyond the prompt are capped
    expect(newPrefillBlocks(160, 10, 16, ov(4, 2, 2, 50), W)).toBe(6 * 0.75);
  });
});

describe("candidateCost", () => {
  it("sums prefill (new + pending), decode and queue terms with their weights", () => {
    const c = cand("a", {
      overlap: { gpu: 4, host: 4, disk: 4 },
      load: { pendingPrefillTokens: 64, activeBlocks: 30, waiting: 3 },
    });
    const t = candidateCost(c, 160, 10, 16, { ...W, prefill: 2, pending: 0.25, decode: 0.5 }, 7);
    expect(t).toEqual({
      newPrefillBlocks: 6,
      prefillCost: 2 * 6 + 0.25 * 4,
      decodeCost: 15,
      queueCost: 6,
      stalePenalty: 7,
      totalCost: 13 + 15 + 6 + 7,
    });
  });

  it("weighs queued prefill below the request's own by default, so a cache hit can wait", () => {
    // A holds 8 of the 10 blocks but has 64 blocks of prefill queued; B holds nothing, idle.
    const a = cand("a", {
      overlap: { gpu: 8, host: 8, disk: 8 },
      load: { pendingPrefillTokens: 64 * 16 },
    });
    const b = cand("b", {});
    const costA = candidateCost(a, 160, 10, 16, DEFAULT_WEIGHTS, 0).totalCost;
    const costB = candidateCost(b, 160, 10, 16, DEFAULT_WEIGHTS, 0).totalCost;
    expect(DEFAULT_WEIGHTS.pending).toBeLessThan(DEFAULT_WEIGHTS.prefill);
    expect(costA).toBeLessThan(costB);
    // With pending weighted like the request's own prefill, the idle worker wins.
    const same = { ...DEFAULT_WEIGHTS, pending: DEFAULT_WEIGHTS.prefill };
    expect(candidateCost(a, 160, 10, 16, same, 0).totalCost).toBeGreaterThan(
      candidateCost(b, 160, 10, 16, same, 0).totalCost,
    );
  });

  it("has defaults with tier weights ordered host ≤ disk ≤ 1", () => {
    expect(DEFAULT_WEIGHTS.host).toBeLessThanOrEqual(DEFAULT_WEIGHTS.disk);
    expect(DEFAULT_WEIGHTS.disk).toBeLessThanOrEqual(1);
  });
});
