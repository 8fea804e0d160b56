/**
 * SGLang's router (`sgl-router`, now SMG) `cache_aware` policy, re-implemented from its
 * source (sgl-project/sglang `sgl-router/src/policies/cache_aware.rs`, read 2026-11-23;
 * docs/replay.md). Per request:
 *
 * 1. load = requests the router sent to a worker and not yet finished. If
 *    `max − min > balance_abs_threshold` AND `max > balance_rel_threshold · min`, the
 *    fleet is imbalanced: take the least-loaded worker (the prompt still goes into the
 *    tree for it).
 * 2. Otherwise look the prompt up in an approximate radix tree built from the router's
 *    own routed requests (no engine events). If the longest match covers more than
 *    `cache_threshold` of the prompt, take the worker holding it; else the worker with
 *    the smallest tree (the most free cache, as the router guesses it).
 * 3. Insert the prompt into the tree for the chosen worker. Every `eviction_interval`
 *    each worker's tree is cut back to `max_tree_size` (least recently used first).
 *
 * The real tree stores characters; ours stores 16-token blocks (docs/replay.md says what
 * that changes). Defaults are SGLang's: 0.3, 64, 1.5, 120 s, 67,108,864.
 */

import { computeBlockKeys } from "../../index/block-key.js";
import type { FleetView, RoutingPolicy } from "../policies.js";
import type { RequestOutcome } from "../sim-fleet.js";
import type { TraceRequest } from "../trace.js";
import { FleetTracker } from "./fleet-tracker.js";
import { RoutedPrefixIndex } from "./routed-prefix-index.js";

export interface SglangCacheAwareConfig {
  readonly cacheThreshold: number;
  readonly balanceAbsThreshold: number;
  readonly balanceRelThreshold: number;
  readonly evictionIntervalMs: number;
  /** Per-worker tree size limit in characters (SGLang's unit). */
  readonly maxTreeSizeChars: number;
  /** Characters per token used to turn `maxTreeSizeChars` into blocks. */
  readonly charsPerToken: number;
}

export const SGLANG_DEFAULTS: SglangCacheAwareConfig = Object.freeze({
  cacheThreshold: 0.3,
  balanceAbsThreshold: 64,
  balanceRelThreshold: 1.5,
  evictionIntervalMs: 120_000,
  maxTreeSizeChars: 67_108_864,
  charsPerToken: 4,
});

export class SglangCacheAwarePolicy implements RoutingPolicy {
  readonly name = "sglang_cache_aware";
  readonly wantsKvEvents = false;
  readonly tracker: FleetTracker;
  readonly tree: RoutedPrefixIndex;
  readonly #maxTreeBlocks: number;
  #lastEvictionMs = 0;
  /** How each decision was made, for tests and the docs. */
  readonly decisions = { imbalanced: 0, cacheHit: 0, smallestTree: 0 };

  constructor(
    readonly fleet: FleetView,
    readonly blockSize: number,
    readonly config: SglangCacheAwareConfig = SGLANG_DEFAULTS,
  ) {
    this.tracker = new FleetTracker(fleet.size);
    this.#maxTreeBlocks = Math.max(
      1,
      Math.floor(config.maxTreeSizeChars / config.charsPerToken / blockSize),
    );
    // The tree is only trimmed by the periodic eviction, so its own limit is unbounded.
    this.tree = new RoutedPrefixIndex(fleet.size, Number.POSITIVE_INFINITY);
  }

  choose(req: TraceRequest, tokens: readonly number[], nowMs: number): number {
    this.#maybeEvict(nowMs);
    const keys = computeBlockKeys(tokens, this.blockSize, null);
    const w = this.pick(keys, tokens.length);
    this.tree.insert(w, keys);
    this.tracker.routed(req.index, w, nowMs);
    return w;
  }

  /** The decision rule alone (no bookkeeping), on the current tree and loads. */
  pick(keys: ReturnType<typeof computeBlockKeys>, promptTokens: number): number {
    const n = this.fleet.size;
    const c = this.config;
    let min = Number.POSITIVE_INFINITY;
    let max = Number.NEGATIVE_INFINITY;
    let minW = 0;
    for (let w = 0; w < n; w++) {
      const load = this.tracker.outstanding(w);
      if (load < min) {
        min = load;
        minW = w;
      }
      if (load > max) max = load;
    }
    if (max - min > c.balanceAbsThreshold && max > min * c.balanceRelThreshold) {
      this.decisions.imbalanced++;
      return minW;
    }
    // Longest match; between equal matches the worker that used the last block most
    // recently (the tree's deepest node remembers its tenants' access times).
    let best = -1;
    let bestLen = 0;
    let bestUse = -1;
    for (let w = 0; w < n; w++) {
      const len = this.tree.match(w, keys);
      if (len === 0) continue;
      const use = this.tree.lastUse(w, keys, len - 1);
      if (len > bestLen || (len === bestLen && use > bestUse)) {
        best = w;
        bestLen = len;
        bestUse = use;
      }
    }
    const rate = promptTokens === 0 ? 0 : (bestLen * this.blockSize) / promptTokens;
    if (best >= 0 && rate > c.cacheThreshold) {
      this.decisions.cacheHit++;
      return best;
    }
    this.decisions.smallestTree++;
    let smallest = 0;
    for (let w = 1; w < n; w++) if (this.tree.size(w) < this.tree.size(smallest)) smallest = w;
    return smallest;
  }

  #maybeEvict(nowMs: number): void {
    if (nowMs - this.#lastEvictionMs < this.config.evictionIntervalMs) return;
    this.#lastEvictionMs = nowMs;
    for (let w = 0; w < this.fleet.size; w++) this.tree.evict(w, this.#maxTreeBlocks);
  }

  onDone(o: RequestOutcome): void {
    this.tracker.done(o.index);
  }
}
