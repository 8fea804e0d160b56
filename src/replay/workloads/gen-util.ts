/**
 * Building blocks of the synthetic workloads: seeded samplers (exponential, Zipf,
 * geometric, clamped lengths) and `Context`, a growing prompt in Mooncake's block terms.
 *
 * In a Mooncake trace a `hash_id` names a 512-token block *and everything before it*, so
 * two prompts share tokens exactly as far as their ids agree. A `Context` keeps the ids
 * of its full blocks and the length of its partial tail; appending tokens completes the
 * tail into a block with a fresh id (its content differs from any block seen before);
 * emitting a prompt gives the tail block its own fresh id (nobody else has that exact
 * partial block). Cloning a context shares its ids: that is how system prompts, chat
 * histories and agent contexts become shared prefixes.
 */

import type { Rng } from "../../util/rng.js";
import { TRACE_BLOCK_TOKENS } from "../trace.js";

/** One line of a Mooncake trace. */
export interface TraceLine {
  readonly timestamp: number;
  readonly input_length: number;
  readonly output_length: number;
  readonly hash_ids: readonly number[];
}

/** Fresh block ids, one counter per generated trace. */
export class IdSource {
  #next = 0;
  next(): number {
    return this.#next++;
  }
}

export class Context {
  constructor(
    readonly ids: IdSource,
    readonly blocks: number[] = [],
    public tail = 0,
  ) {}

  get length(): number {
    return this.blocks.length * TRACE_BLOCK_TOKENS + this.tail;
  }

  /** `n` more tokens at the end. */
  append(n: number): this {
    this.tail += n;
    while (this.tail >= TRACE_BLOCK_TOKENS) {
      this.blocks.push(this.ids.next());
      this.tail -= TRACE_BLOCK_TOKENS;
    }
    return this;
  }

  clone(): Context {
    return new Context(this.ids, [...this.blocks], this.tail);
  }

  /** This context as a request's prompt. */
  prompt(timestampMs: number, outputLength: number): TraceLine {
    const hashIds = this.tail > 0 ? [...this.blocks, this.ids.next()] : [...this.blocks];
    return {
      timestamp: Math.round(timestampMs),
      input_length: this.length,
      output_length: Math.max(1, Math.round(outputLength)),
      hash_ids: hashIds,
    };
  }
}

/** Exponential with the given mean. */
export function exponential(rng: Rng, mean: number): number {
  return -mean * Math.log(1 - rng());
}

/** A length around `mean` (exponential), clamped to [min, max], integer. */
export function length(rng: Rng, mean: number, min = 1, max = 32 * mean): number {
  return Math.max(min, Math.min(max, Math.round(exponential(rng, mean))));
}

/** Geometric count ≥ 1 with the given mean. */
export function geometric(rng: Rng, mean: number): number {
  if (mean <= 1) return 1;
  const p = 1 / mean;
  return 1 + Math.floor(Math.log(1 - rng()) / Math.log(1 - p));
}

/** Zipf over ranks 0..n−1 with exponent s (rank 0 the most popular). */
export function zipfSampler(rng: Rng, n: number, s: number): () => number {
  const cdf = new Float64Array(n);
  let sum = 0;
  for (let k = 0; k < n; k++) {
    sum += 1 / (k + 1) ** s;
    cdf[k] = sum;
  }
  return () => {
    const u = rng() * sum;
    let lo = 0;
    let hi = n - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cdf[mid]! < u) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
}

/** Poisson arrival times (ms) at `ratePerSec`, one per call. */
export function poissonClock(rng: Rng, ratePerSec: number): () => number {
  let t = 0;
  return () => {
    t += exponential(rng, 1000 / ratePerSec);
    return t;
  };
}
