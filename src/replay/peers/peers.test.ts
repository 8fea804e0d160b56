import { describe, expect, it } from "vitest";
import { computeBlockKeys } from "../../index/block-key.js";
import { seededRng } from "../../util/rng.js";
import { AibrixPrefixCachePolicy } from "./aibrix-prefix-cache.js";
import { DynamoKvPolicy } from "./dynamo-kv-router.js";
import type { FleetTracker } from "./fleet-tracker.js";
import {
  LlmdApproxPolicy,
  LlmdPrecisePolicy,
  normalisedPrefixScores,
  queueScores,
} from "./llmd-scorers.js";
import { ProductionStackKvawarePolicy } from "./production-stack-kvaware.js";
import { RoutedPrefixIndex } from "./routed-prefix-index.js";
import { SglangCacheAwarePolicy } from "./sglang-cache-aware.js";
import { BS, EventFleet, fleetView, outcome, prompt, traceRequest } from "./test-helpers.js";

const keys = (t: readonly number[]) => computeBlockKeys(t, BS, null);

/** Route `n` requests to worker `w` in the policy's own books (they stay in flight). */
function load(tracker: FleetTracker, w: number, n: number): void {
  for (let i = 0; i < n; i++) tracker.routed(-(w * 1000 + i + 1), w, 0);
}

describe("RoutedPrefixIndex", () => {
  it("matches leading blocks only and forgets the least recently used first", () => {
    const idx = new RoutedPrefixIndex(2, 3);
    idx.insert(0, keys(prompt(1, 2, 3)));
    expect(idx.match(0, keys(prompt(1, 2, 9)))).toBe(2);
    expect(idx.match(0, keys(prompt(9, 2, 3)))).toBe(0);
    expect(idx.match(1, keys(prompt(1, 2, 3)))).toBe(0);
    idx.insert(0, keys(prompt(5))); // capacity 3: block 1 (oldest) goes
    expect(idx.size(0)).toBe(3);
    expect(idx.match(0, keys(prompt(1, 2, 3)))).toBe(0);
  });
});

describe("SGLang cache_aware", () => {
  it("follows a match above cache_threshold, else the smallest tree", () => {
    const p = new SglangCacheAwarePolicy(fleetView(3), BS);
    p.tree.insert(1, keys(prompt(1, 2, 3, 4)));
    p.tree.insert(0, keys(prompt(7, 8)));
    // 2 of 4 blocks (50 %) > 30 %: worker 1.
    expect(p.pick(keys(prompt(1, 2, 5, 6)), 4 * BS)).toBe(1);
    // 1 of 4 blocks (25 %) ≤ 30 %: smallest tree, worker 2 (empty).
    expect(p.pick(keys(prompt(1, 9, 5, 6)), 4 * BS)).toBe(2);
  });

  it("goes shortest-queue only when both balance thresholds are crossed", () => {
    const p = new SglangCacheAwarePolicy(fleetView(2), BS);
    p.tree.insert(0, keys(prompt(1, 2)));
    load(p.tracker, 0, 100);
    load(p.tracker, 1, 70); // gap 30 ≤ 64: balanced, cache wins
    expect(p.pick(keys(prompt(1, 2)), 2 * BS)).toBe(0);
    const q = new SglangCacheAwarePolicy(fleetView(2), BS);
    q.tree.insert(0, keys(prompt(1, 2)));
    load(q.tracker, 0, 100);
    load(q.tracker, 1, 20); // gap 80 > 64 and 100 > 1.5·20: imbalanced
    expect(q.pick(keys(prompt(1, 2)), 2 * BS)).toBe(1);
    expect(q.decisions.imbalanced).toBe(1);
  });

  it("records its own decisions in the tree and forgets finished load", () => {
    const p = new SglangCacheAwarePolicy(fleetView(2), BS);
    const a = traceRequest(prompt(1, 2, 3));
    const w = p.choose(a, prompt(1, 2, 3), 0);
    expect(p.tracker.outstanding(w)).toBe(1);
    expect(p.choose(traceRequest(prompt(1, 2, 3, 4)), prompt(1, 2, 3, 4), 1)).toBe(w);
    p.onDone(outcome(a.index, w));
    expect(p.tracker.outstanding(w)).toBe(1);
  });
});

describe("llm-d scorers", () => {
  it("min-max normalises prefix scores over the pods that hold any", () => {
    const out = new Float64Array(4);
    normalisedPrefixScores([0, 5, 0, 0], out);
    expect([...out]).toEqual([0, 1, 0, 0]);
    normalisedPrefixScores([0, 4, 8, 6], out);
    expect([...out]).toEqual([0, 0, 1, 0.5]);
    queueScores([0, 2, 4, 4], out);
    expect([...out]).toEqual([1, 0.5, 0, 0]);
    queueScores([3, 3, 3, 3], out);
    expect([...out]).toEqual([1, 1, 1, 1]);
  });

  it("precise: prefix 2 outweighs queue 1 + kv 1 until the holder is nearly full and queued", () => {
    const p = new LlmdPrecisePolicy(fleetView(3), BS, seededRng(1));
    const f = new EventFleet(3, p);
    f.cache(0, prompt(1, 2, 3, 4));
    const idle = { running: 0, waiting: 0, kvUsage: 0, numGpuBlocks: 100 };
    p.onScrape(1, idle);
    p.onScrape(2, idle);
    p.onScrape(0, { running: 5, waiting: 10, kvUsage: 0.5, numGpuBlocks: 100 });
    // holder: 2·1 + 1·0.5 + 1·0 = 2.5; idle pods: 0 + 1 + 1 = 2
    expect(p.pick(keys(prompt(1, 2, 3, 4)))).toBe(0);
    p.onScrape(0, { running: 5, waiting: 10, kvUsage: 0.9, numGpuBlocks: 100 });
    expect(p.pick(keys(prompt(1, 2, 3, 4)))).toBe(0); // 2.1 > 2
    // A second, shorter holder: min-max gives it 0 (not 1/4), so it ranks with the idle pod.
    f.cache(1, prompt(1));
    p.onScrape(1, { running: 0, waiting: 0, kvUsage: 0.05, numGpuBlocks: 100 });
    expect(p.pick(keys(prompt(1, 2, 3, 4)))).toBe(0); // 2.1 vs 1.95 vs 2
    p.onScrape(0, { running: 5, waiting: 10, kvUsage: 1, numGpuBlocks: 100 });
    // 2 vs 1.95 vs 2: a tie between the full holder and the idle pod, broken at random
    const picks = new Set(Array.from({ length: 40 }, () => p.pick(keys(prompt(1, 2, 3, 4)))));
    expect([...picks].sort()).toEqual([0, 2]);
  });

  it("approximate: fraction of the prompt routed to the pod before, weights 3:2:2", () => {
    const p = new LlmdApproxPolicy(fleetView(2), BS, seededRng(1));
    const w = p.choose(traceRequest(prompt(1, 2, 3, 4)), prompt(1, 2, 3, 4));
    p.onScrape(w, { running: 1, waiting: 2, kvUsage: 0.2, numGpuBlocks: 100 });
    p.onScrape(1 - w, { running: 0, waiting: 0, kvUsage: 0, numGpuBlocks: 100 });
    // holder, half match: 3·0.5 + 2·0.8 + 2·0 = 3.1; other: 0 + 2 + 2 = 4
    expect(p.pick(keys(prompt(1, 2, 9, 9)))).toBe(1 - w);
    // full match: 3 + 1.6 = 4.6 > 4
    expect(p.pick(keys(prompt(1, 2, 3, 4)))).toBe(w);
  });
});

describe("Dynamo KV router cost", () => {
  it("prefers cached blocks unless the holder's active prefill and decode blocks cost more", () => {
    const p = new DynamoKvPolicy(fleetView(2), BS, seededRng(1));
    const f = new EventFleet(2, p);
    f.cache(0, prompt(1, 2, 3, 4, 5, 6, 7, 8));
    const req = keys(prompt(1, 2, 3, 4, 5, 6, 7, 8, 9, 10));
    // worker 0: prefill 2 blocks + decode 10 = 12; worker 1: 10 + 10 = 20
    expect(p.pick(req, 10 * BS).worker).toBe(0);
    // 7 blocks of unrelated prefill in flight on worker 0: (2 + 7) + 10 = 19 < 20, still 0
    p.active[0]!.add({ worker: 0, blocks: [], partial: 0, prefillTokens: 7 * BS });
    expect(p.pick(req, 10 * BS).worker).toBe(0);
    // 2 more blocks of prefill (and their 2 decode blocks): 11 + 12 = 23 > 20
    p.active[0]!.add({ worker: 0, blocks: [], partial: 2, prefillTokens: 2 * BS });
    expect(p.pick(req, 10 * BS).worker).toBe(1);
  });

  it("counts shared blocks of active requests once and drops prefill at first token", () => {
    const p = new DynamoKvPolicy(fleetView(2), BS, seededRng(1));
    const a = traceRequest(prompt(1, 2, 3));
    const w = p.choose(a, prompt(1, 2, 3));
    const b = traceRequest(prompt(1, 2, 4));
    // No cache anywhere; worker w has 3 active blocks and 48 prefill tokens: the other wins.
    expect(p.choose(b, prompt(1, 2, 4))).toBe(1 - w);
    expect(p.active[w]!.blocks).toBe(3);
    expect(p.active[w]!.prefillTokens).toBe(3 * BS);
    p.onFirstToken(outcome(a.index, w));
    expect(p.active[w]!.prefillTokens).toBe(0);
    p.onDone(outcome(a.index, w));
    expect(p.active[w]!.blocks).toBe(0);
  });
});

describe("AIBrix prefix-cache", () => {
  it("takes the best match whose running count is within mean + 1 sigma", () => {
    const p = new AibrixPrefixCachePolicy(fleetView(4), BS, seededRng(1));
    p.table.insert(0, keys(prompt(1, 2, 3, 4)));
    p.table.insert(1, keys(prompt(1, 2)));
    // running 6, 0, 0, 0: mean 1.5, sigma 2.6 → limit 4.1; worker 0 (100 %) too busy, 1 (50 %) ok
    load(p.tracker, 0, 6);
    expect(p.pick(keys(prompt(1, 2, 3, 4)))).toBe(1);
    expect(p.decisions.prefixMatch).toBe(1);
  });

  it("switches to least-request when max − min running exceeds 8", () => {
    const p = new AibrixPrefixCachePolicy(fleetView(3), BS, seededRng(1));
    p.table.insert(0, keys(prompt(1, 2)));
    load(p.tracker, 0, 3);
    load(p.tracker, 1, 9);
    load(p.tracker, 2, 1); // gap 8: not imbalanced, worker 0 within mean+σ
    expect(p.pick(keys(prompt(1, 2)))).toBe(0);
    load(p.tracker, 1, 1); // gap 9
    expect(p.pick(keys(prompt(1, 2)))).toBe(2);
    expect(p.decisions.imbalanced).toBe(1);
  });
});

describe("production-stack kvaware", () => {
  it("routes to the holder only when its match is within 2,000 tokens of the prompt", () => {
    const p = new ProductionStackKvawarePolicy(fleetView(3), BS);
    const f = new EventFleet(3, p);
    const long = Array.from({ length: 200 }, (_, i) => i + 1); // 200 blocks = 3,200 tokens
    f.cache(2, prompt(...long.slice(0, 100))); // holds 1,600 tokens
    // prompt 3,200: 1,600 < 3,200 − 2,000 = 1,200? no, 1,600 ≥ 1,200: the holder
    expect(p.pick(keys(prompt(...long)), 200 * BS, 0)).toBe(2);
    const longer = Array.from({ length: 300 }, (_, i) => i + 1); // 4,800 tokens
    // 1,600 < 4,800 − 2,000: fallback to QPS; nobody served yet → first unseen engine
    expect(p.pick(keys(prompt(...longer)), 300 * BS, 0)).toBe(0);
  });

  it("QPS fallback: the engine with the fewest requests in the window", () => {
    const p = new ProductionStackKvawarePolicy(fleetView(2), BS);
    p.tracker.routed(1, 0, 0);
    p.tracker.routed(2, 0, 10);
    p.tracker.routed(3, 1, 20);
    expect(p.pick(keys(prompt(1)), BS, 30)).toBe(1);
    // 60 s later the window has emptied of worker 0's two early requests but not worker 1's
    expect(p.pick(keys(prompt(1)), BS, 60_015)).toBe(0);
  });
});
