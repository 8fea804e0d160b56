/**
 * llm-d's inference scheduler (its Endpoint Picker), re-implemented from its source as two
 * replay policies (docs/replay.md cites the files, read 2026-11-23):
 *
 * - `llmd_precise`: the precise prefix-cache scorer (llm-d/llm-d-inference-scheduler
 *   `pkg/plugins/scorer/precise_prefix_cache.go`, `utils.go`): each pod's longest
 *   consecutive run of the prompt's blocks in the KV-event-fed index, min-max normalised
 *   over the pods that hold any (a single holder scores 1, pods holding none 0); combined
 *   as the precise-prefix-cache guide does, prefix 2 : kv-cache-utilization 1 : queue 1.
 * - `llmd_approx`: the approximate prefix-cache scorer (gateway-api-inference-extension's
 *   `prefix-cache-scorer`, llm-d's default "intelligent inference scheduling" path):
 *   score = matched blocks / prompt blocks (at most 256 blocks looked at), from an LRU of
 *   the blocks the scheduler itself routed (31,250 blocks per server); combined as that
 *   guide does, prefix 3 : queue 2 : kv-cache-utilization 2.
 *
 * Both: kv-cache-utilization score = 1 − the pod's scraped KV usage; queue score =
 * (max − waiting) / (max − min) of the pods' scraped waiting queues (1 when all equal);
 * weighted sum; the max-score picker takes the highest, ties at random.
 */

import { computeBlockKeys } from "../../index/block-key.js";
import type { BlockKeySeq } from "../../index/types.js";
import type { KvEvent } from "../../protocol/events.js";
import type { Rng } from "../../util/rng.js";
import type { FleetView, RoutingPolicy, ScrapedLoad } from "../policies.js";
import type { TraceRequest } from "../trace.js";
import { EventPrefixView } from "./event-prefix-view.js";
import { RoutedPrefixIndex } from "./routed-prefix-index.js";

export interface LlmdWeights {
  readonly prefix: number;
  readonly kvUtilization: number;
  readonly queue: number;
}

export const LLMD_PRECISE_WEIGHTS: LlmdWeights = Object.freeze({
  prefix: 2,
  kvUtilization: 1,
  queue: 1,
});
export const LLMD_APPROX_WEIGHTS: LlmdWeights = Object.freeze({
  prefix: 3,
  kvUtilization: 2,
  queue: 2,
});
/** GIE prefix plugin defaults. */
export const LLMD_APPROX_MAX_PREFIX_BLOCKS = 256;
export const LLMD_APPROX_LRU_BLOCKS_PER_SERVER = 31_250;

/** Min-max normalised precise prefix scores: `blocks[w]` > 0 means w is in the index's answer. */
export function normalisedPrefixScores(blocks: ArrayLike<number>, out: Float64Array): void {
  let min = Number.POSITIVE_INFINITY;
  let max = Number.NEGATIVE_INFINITY;
  for (let w = 0; w < blocks.length; w++) {
    const b = blocks[w]!;
    if (b <= 0) continue;
    min = Math.min(min, b);
    max = Math.max(max, b);
  }
  for (let w = 0; w < blocks.length; w++) {
    const b = blocks[w]!;
    out[w] = b <= 0 ? 0 : min === max ? 1 : (b - min) / (max - min);
  }
}

/** GIE queue scorer over waiting-queue lengths. */
export function queueScores(waiting: ArrayLike<number>, out: Float64Array): void {
  let min = Number.POSITIVE_INFINITY;
  let max = Number.NEGATIVE_INFINITY;
  for (let w = 0; w < waiting.length; w++) {
    min = Math.min(min, waiting[w]!);
    max = Math.max(max, waiting[w]!);
  }
  for (let w = 0; w < waiting.length; w++) {
    out[w] = max === min ? 1 : (max - waiting[w]!) / (max - min);
  }
}

/** Shared scorer plumbing: scraped loads, weights, the max-score picker. */
abstract class LlmdPolicy implements RoutingPolicy {
  abstract readonly name: string;
  abstract readonly wantsKvEvents: boolean;
  readonly waiting: Float64Array;
  readonly kvUsage: Float64Array;
  readonly #prefix: Float64Array;
  readonly #queue: Float64Array;

  constructor(
    readonly fleet: FleetView,
    readonly blockSize: number,
    readonly weights: LlmdWeights,
    readonly rng: Rng,
  ) {
    this.waiting = new Float64Array(fleet.size);
    this.kvUsage = new Float64Array(fleet.size);
    this.#prefix = new Float64Array(fleet.size);
    this.#queue = new Float64Array(fleet.size);
  }

  /** Fill `out` with the prefix scorer's 0..1 score per pod. */
  protected abstract prefixScores(keys: BlockKeySeq, out: Float64Array): void;
  protected routed(_w: number, _keys: BlockKeySeq): void {}

  choose(_req: TraceRequest, tokens: readonly number[]): number {
    const keys = computeBlockKeys(tokens, this.blockSize, null);
    const w = this.pick(keys);
    this.routed(w, keys);
    return w;
  }

  /** Weighted sum of the three scorers, max-score picker (ties at random). */
  pick(keys: BlockKeySeq): number {
    this.prefixScores(keys, this.#prefix);
    queueScores(this.waiting, this.#queue);
    const wt = this.weights;
    let best = Number.NEGATIVE_INFINITY;
    let ties = 0;
    let chosen = 0;
    for (let w = 0; w < this.fleet.size; w++) {
      const s =
        wt.prefix * this.#prefix[w]! +
        wt.kvUtilization * (1 - this.kvUsage[w]!) +
        wt.queue * this.#queue[w]!;
      if (s > best + 1e-12) {
        best = s;
        chosen = w;
        ties = 1;
      } else if (Math.abs(s - best) <= 1e-12) {
        // Reservoir sampling over the tied pods: each is equally likely.
        ties++;
        if (this.rng() * ties < 1) chosen = w;
      }
    }
    return chosen;
  }

  onScrape(w: number, load: ScrapedLoad): void {
    this.waiting[w] = load.waiting;
    this.kvUsage[w] = Math.min(1, Math.max(0, load.kvUsage));
  }
}

/** llm-d with the precise (KV-event-fed) prefix-cache scorer. */
export class LlmdPrecisePolicy extends LlmdPolicy {
  readonly name = "llmd_precise";
  readonly wantsKvEvents = true;
  readonly view: EventPrefixView;
  readonly #blocks: Int32Array;

  constructor(fleet: FleetView, blockSize: number, rng: Rng, weights = LLMD_PRECISE_WEIGHTS) {
    super(fleet, blockSize, weights, rng);
    this.view = new EventPrefixView(fleet.size, blockSize);
    this.#blocks = new Int32Array(fleet.size);
  }

  protected prefixScores(keys: BlockKeySeq, out: Float64Array): void {
    this.view.longestPrefix(keys, this.#blocks);
    normalisedPrefixScores(this.#blocks, out);
  }

  onKvEvent(w: number, event: KvEvent): void {
    this.view.apply(w, event);
  }
}

/** llm-d with the approximate (routing-history) prefix-cache scorer. */
export class LlmdApproxPolicy extends LlmdPolicy {
  readonly name = "llmd_approx";
  readonly wantsKvEvents = false;
  readonly table: RoutedPrefixIndex;

  constructor(fleet: FleetView, blockSize: number, rng: Rng, weights = LLMD_APPROX_WEIGHTS) {
    super(fleet, blockSize, weights, rng);
    this.table = new RoutedPrefixIndex(fleet.size, LLMD_APPROX_LRU_BLOCKS_PER_SERVER);
  }

  protected prefixScores(keys: BlockKeySeq, out: Float64Array): void {
    const total = Math.min(keys.length / 2, LLMD_APPROX_MAX_PREFIX_BLOCKS);
    for (let w = 0; w < this.fleet.size; w++) {
      out[w] = total === 0 ? 0 : this.table.match(w, keys, total) / total;
    }
  }

  protected override routed(w: number, keys: BlockKeySeq): void {
    this.table.insert(w, keys);
  }
}
