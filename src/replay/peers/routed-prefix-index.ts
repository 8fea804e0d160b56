/**
 * An approximate prefix index built from the router's own routing decisions, as SGLang's
 * cache-aware tree, AIBrix's prefix hash table and llm-d's approximate prefix scorer keep
 * one: a routed prompt's blocks are assumed cached on the worker it went to, no engine
 * events are read. Per worker, a set of chained block keys in least-recently-used order
 * (`block-lru.ts`; touching a key makes it the newest), trimmed to a capacity.
 * Because a chained key names its whole prefix, "worker holds key i" implies the prefix,
 * so the longest match is a walk from the first block.
 */

import type { BlockKeySeq } from "../../index/types.js";
import { BlockLru } from "./block-lru.js";

/** Key pair (hi, lo) of block i as one exact-enough number (53 bits of the 64). */
export function blockKeyNumber(keys: BlockKeySeq, i: number): number {
  return (keys[2 * i]! & 0x1f_ffff) * 0x1_0000_0000 + keys[2 * i + 1]!;
}

export class RoutedPrefixIndex {
  readonly #held: BlockLru[];
  #tick = 0;

  constructor(
    readonly workers: number,
    /** Blocks remembered per worker before the least recently used are dropped. */
    readonly capacityBlocks: number,
  ) {
    this.#held = Array.from({ length: workers }, () => new BlockLru());
  }

  /** Blocks remembered for worker `w` (its "tree size"). */
  size(w: number): number {
    return this.#held[w]!.size;
  }

  /** Leading blocks of `keys` remembered for `w` (at most `limit`). */
  match(w: number, keys: BlockKeySeq, limit = Number.POSITIVE_INFINITY): number {
    const held = this.#held[w]!;
    const n = Math.min(keys.length / 2, limit);
    let i = 0;
    while (i < n && held.has(keys[2 * i]!, keys[2 * i + 1]!)) i++;
    return i;
  }

  /** When worker `w` last had block `i` of `keys` routed to it (0 = never). */
  lastUse(w: number, keys: BlockKeySeq, i: number): number {
    return this.#held[w]!.get(keys[2 * i]!, keys[2 * i + 1]!);
  }

  /** The prompt `keys` was routed to `w`: remember (or refresh) its blocks. */
  insert(w: number, keys: BlockKeySeq): void {
    const held = this.#held[w]!;
    const t = ++this.#tick;
    for (let i = 0; i < keys.length / 2; i++) held.touch(keys[2 * i]!, keys[2 * i + 1]!, t);
    this.evict(w, this.capacityBlocks);
  }

  /** Drop `w`'s least recently used blocks until it holds at most `max`. */
  evict(w: number, max: number): void {
    this.#held[w]!.trim(max);
  }
}
