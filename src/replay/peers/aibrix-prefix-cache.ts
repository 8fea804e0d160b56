/**
 * AIBrix's `prefix-cache` routing algorithm, re-implemented from its source
 * (vllm-project/aibrix `pkg/plugins/gateway/algorithms/prefix_cache.go` and the
 * pseudo-code in `pkg/plugins/gateway/algorithms/README.md`, read 2026-11-23;
 * docs/replay.md). Per request:
 *
 * 1. running = requests in flight per pod, as the gateway counts them. If
 *    `max − min > 8` (ABS_RUNNING_REQUEST_COUNT) the load is imbalanced: the pod with
 *    the fewest running requests.
 * 2. Otherwise match the prompt's block hashes against the gateway's prefix table (filled
 *    from its own routed requests). Matched pods are ordered by match percentage, high
 *    to low, ties by fewer running requests; the first whose running count is within
 *    `mean + 1·σ` of all pods' counts (AIBRIX_PREFIX_CACHE_STANDARD_DEVIATION_FACTOR = 1)
 *    wins.
 * 3. No match, or every match too busy: the pod with the fewest running requests.
 * 4. The prompt's hashes are added to the table for the chosen pod.
 */

import { computeBlockKeys } from "../../index/block-key.js";
import type { BlockKeySeq } from "../../index/types.js";
import type { Rng } from "../../util/rng.js";
import type { FleetView, RoutingPolicy } from "../policies.js";
import type { RequestOutcome } from "../sim-fleet.js";
import type { TraceRequest } from "../trace.js";
import { FleetTracker } from "./fleet-tracker.js";
import { RoutedPrefixIndex } from "./routed-prefix-index.js";

export interface AibrixPrefixCacheConfig {
  /** Imbalance when max − min running requests exceeds this. */
  readonly imbalanceAbsCount: number;
  /** A matched pod qualifies when running ≤ mean + factor · σ. */
  readonly stdDevFactor: number;
}

export const AIBRIX_DEFAULTS: AibrixPrefixCacheConfig = Object.freeze({
  imbalanceAbsCount: 8,
  stdDevFactor: 1,
});

export class AibrixPrefixCachePolicy implements RoutingPolicy {
  readonly name = "aibrix_prefix_cache";
  readonly wantsKvEvents = false;
  readonly tracker: FleetTracker;
  readonly table: RoutedPrefixIndex;
  readonly decisions = { imbalanced: 0, prefixMatch: 0, leastRequest: 0 };

  constructor(
    readonly fleet: FleetView,
    readonly blockSize: number,
    readonly rng: Rng,
    readonly config: AibrixPrefixCacheConfig = AIBRIX_DEFAULTS,
  ) {
    this.tracker = new FleetTracker(fleet.size);
    this.table = new RoutedPrefixIndex(fleet.size, Number.POSITIVE_INFINITY);
  }

  choose(req: TraceRequest, tokens: readonly number[], nowMs: number): number {
    const keys = computeBlockKeys(tokens, this.blockSize, null);
    const w = this.pick(keys);
    this.table.insert(w, keys);
    this.tracker.routed(req.index, w, nowMs);
    return w;
  }

  #leastRequest(): number {
    // Among equally loaded pods AIBrix picks at random.
    const n = this.fleet.size;
    let min = Number.POSITIVE_INFINITY;
    const ties: number[] = [];
    for (let w = 0; w < n; w++) {
      const r = this.tracker.outstanding(w);
      if (r < min) {
        min = r;
        ties.length = 0;
      }
      if (r === min) ties.push(w);
    }
    return ties[Math.min(ties.length - 1, Math.floor(this.rng() * ties.length))]!;
  }

  /** The decision rule alone, on the current table and counts. */
  pick(keys: BlockKeySeq): number {
    const n = this.fleet.size;
    let min = Number.POSITIVE_INFINITY;
    let max = Number.NEGATIVE_INFINITY;
    let sum = 0;
    for (let w = 0; w < n; w++) {
      const r = this.tracker.outstanding(w);
      min = Math.min(min, r);
      max = Math.max(max, r);
      sum += r;
    }
    if (max - min > this.config.imbalanceAbsCount) {
      this.decisions.imbalanced++;
      return this.#leastRequest();
    }
    const blocks = keys.length / 2;
    const matched: { w: number; pct: number; running: number; order: number }[] = [];
    if (blocks > 0) {
      for (let w = 0; w < n; w++) {
        const len = this.table.match(w, keys);
        if (len > 0) {
          matched.push({
            w,
            pct: Math.floor((100 * len) / blocks),
            running: this.tracker.outstanding(w),
            order: this.rng(),
          });
        }
      }
    }
    if (matched.length > 0) {
      const mean = sum / n;
      let sq = 0;
      for (let w = 0; w < n; w++) sq += (this.tracker.outstanding(w) - mean) ** 2;
      const sigma = Math.sqrt(sq / n);
      // Shuffle, then a stable sort: ties beyond (pct, running) stay random, as in AIBrix.
      matched.sort((a, b) => a.order - b.order);
      matched.sort((a, b) => (a.pct === b.pct ? a.running - b.running : b.pct - a.pct));
      for (const m of matched) {
        if (m.running <= mean + this.config.stdDevFactor * sigma) {
          this.decisions.prefixMatch++;
          return m.w;
        }
      }
    }
    this.decisions.leastRequest++;
    return this.#leastRequest();
  }

  onDone(o: RequestOutcome): void {
    this.tracker.done(o.index);
  }
}
