/**
 * Prefix-hit ceilings computed straight from a trace's hash_ids, without simulating
 * anything: what one infinite cache, or N infinite caches fed round-robin, would hit.
 * They are the yardsticks the replay is checked against (see docs/replay.md).
 *
 * Two measures:
 * - blocks: a request hits its leading trace blocks already seen by its cache (the
 *   figure the trace README quotes);
 * - tokens: what a paged prefix cache with `blockSize`-token pages hits. Two prompts
 *   that agree on their first m trace blocks share min(512·m, both lengths) tokens, of
 *   which only whole pages can be hit, and never the prompt's last token (vLLM always
 *   computes at least one token so it has logits to sample from).
 */

import { TRACE_BLOCK_TOKENS, type TraceRequest } from "./trace.js";

export interface CeilingResult {
  readonly blockHits: number;
  readonly blocks: number;
  readonly blockHitRate: number;
  readonly tokenHits: number;
  readonly tokens: number;
  readonly tokenHitRate: number;
}

/** Largest number of prompt tokens a paged cache can serve for a prompt of `length`. */
export function maxHitTokens(length: number, blockSize: number): number {
  return Math.floor((length - 1) / blockSize) * blockSize;
}

/**
 * Tokens a prompt of `length` can hit from an earlier prompt of `otherLength` with which it
 * agrees on its first `blocks` trace blocks: the shared min(512·blocks, both lengths), in
 * whole `blockSize` pages, never the prompt's last token.
 */
export function sharedPageTokens(
  blocks: number,
  otherLength: number,
  length: number,
  blockSize: number,
): number {
  const shared = Math.min(blocks * TRACE_BLOCK_TOKENS, otherLength, length);
  return Math.min(Math.floor(shared / blockSize) * blockSize, maxHitTokens(length, blockSize));
}

/**
 * An infinite cache of trace prompts: hash_id → the longest prompt seen that contains it
 * (hash_ids name prefixes, so every such prompt shares the whole prefix up to that block).
 */
export class PromptPrefixCache {
  readonly #longest = new Map<number, number>();

  /** How many of `r`'s leading blocks it holds. */
  leadingBlocks(r: TraceRequest): number {
    const ids = r.hashIds;
    let leading = 0;
    while (leading < ids.length && this.#longest.has(ids[leading]!)) leading++;
    return leading;
  }

  /** Tokens of `r` it would serve over its first `leading` blocks (`sharedPageTokens`). */
  hitTokens(r: TraceRequest, blockSize: number, leading = this.leadingBlocks(r)): number {
    let hit = 0;
    for (let b = 0; b < leading; b++) {
      const h = sharedPageTokens(
        b + 1,
        this.#longest.get(r.hashIds[b]!)!,
        r.inputLength,
        blockSize,
      );
      if (h > hit) hit = h;
    }
    return hit;
  }

  /** `r` is now cached. */
  record(r: TraceRequest): void {
    for (const id of r.hashIds) {
      const prev = this.#longest.get(id);
      if (prev === undefined || prev < r.inputLength) this.#longest.set(id, r.inputLength);
    }
  }
}

/**
 * Hits of `workers` infinite private caches, request i going to cache `assign(i)`
 * (default round-robin; 1 worker = the trace's ceiling). Requests are taken in order.
 */
export function infiniteCacheCeiling(
  requests: readonly TraceRequest[],
  options: {
    workers?: number;
    blockSize?: number;
    assign?: (i: number) => number;
    /** Sees each request's hit in tokens (with 1 worker: the best any cache could give it). */
    onHit?: (i: number, hitTokens: number) => void;
  } = {},
): CeilingResult {
  const workers = options.workers ?? 1;
  const blockSize = options.blockSize ?? 16;
  const assign = options.assign ?? ((i: number) => i % workers);
  const caches = Array.from({ length: workers }, () => new PromptPrefixCache());
  let blockHits = 0;
  let blocks = 0;
  let tokenHits = 0;
  let tokens = 0;
  for (let i = 0; i < requests.length; i++) {
    const r = requests[i]!;
    const cache = caches[assign(i)]!;
    const leading = cache.leadingBlocks(r);
    const hit = cache.hitTokens(r, blockSize, leading);
    blockHits += leading;
    blocks += r.hashIds.length;
    tokenHits += hit;
    tokens += r.inputLength;
    options.onHit?.(i, hit);
    cache.record(r);
  }
  return {
    blockHits,
    blocks,
    blockHitRate: blocks === 0 ? 0 : blockHits / blocks,
    tokenHits,
    tokens,
    tokenHitRate: tokens === 0 ? 0 : tokenHits / tokens,
  };
}
