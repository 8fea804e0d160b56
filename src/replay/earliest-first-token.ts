/**
 * `earliest_first_token`: a yardstick policy for the tail analysis (docs/replay.md,
 * "Where the 54 unforced requests come from"), asked for by name only. It knows the
 * present exactly — more than any router can — and sends each request to the worker
 * where its first token comes soonest: the time that worker's FIFO frees its prefill
 * plus this prompt's prefill there with that worker's cached prefix.
 *
 * It keeps its own copy of each worker's state from its own decisions, in the replay's
 * timing model: when the worker's prefill is free (start = max(arrival, free), one
 * prefill at a time, FIFO) and which prefixes it holds (hash_ids → longest prompt; what
 * a cache that never evicts would hit, `ceiling.ts`'s rule). With unlimited caches and
 * running slots to spare that copy is exact (the test checks every request's first token
 * against the fleet's); with evicting caches or full slots it is an estimate.
 *
 * It is greedy: it does not hold a worker free for a long prompt that has not arrived,
 * and it weighs no hit rate — it shows what knowing the present is worth, not the future.
 */

import { PromptPrefixCache } from "./ceiling.js";
import type { RoutingPolicy } from "./policies.js";
import { prefillMs, type TimingModel } from "./timing-model.js";
import type { TraceRequest } from "./trace.js";

export class EarliestFirstTokenPolicy implements RoutingPolicy {
  readonly name = "earliest_first_token";
  readonly wantsKvEvents = false;
  readonly #freeAtMs: Float64Array;
  /** Per worker: the prompts routed there, as a cache that never evicts. */
  readonly #held: PromptPrefixCache[];
  /** The first token it expects for each request routed (trace index → ms). */
  readonly expectedFirstTokenMs = new Map<number, number>();

  constructor(
    workers: number,
    readonly timing: Pick<TimingModel, "prefillTokensPerSec" | "prefillOverheadMs">,
    readonly blockSize: number,
  ) {
    this.#freeAtMs = new Float64Array(workers);
    this.#held = Array.from({ length: workers }, () => new PromptPrefixCache());
  }

  choose(r: TraceRequest, _tokens: readonly number[], nowMs: number): number {
    let best = 0;
    let bestFirstToken = Number.POSITIVE_INFINITY;
    for (let w = 0; w < this.#freeAtMs.length; w++) {
      const start = Math.max(nowMs, this.#freeAtMs[w]!);
      const firstToken =
        start + prefillMs(this.timing, r.inputLength - this.#held[w]!.hitTokens(r, this.blockSize));
      if (firstToken < bestFirstToken) {
        bestFirstToken = firstToken;
        best = w;
      }
    }
    this.#freeAtMs[best] = bestFirstToken;
    this.expectedFirstTokenMs.set(r.index, bestFirstToken);
    this.#held[best]!.record(r);
    return best;
  }
}
