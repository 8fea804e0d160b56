/**
 * Storage for the holder lists of nodes held by two or more workers. Most blocks have one
 * holder, kept inline in the node; shared blocks (system prompts) keep theirs here, in
 * contiguous chunks of one big Uint32Array so `findMatches` reads them without pointer
 * chasing. Chunks come in power-of-two sizes (2, 4, 8, …) with one free list per size.
 *
 * The array grows in place (`GrowableWords`, as the record pools' do): it used to be replaced
 * by a copy 1.5× larger, so each growth touched the whole list in fresh memory again (at
 * 7,000 workers in `bench:fleet`, a 13 MB pool cost ~30 MB of first-touch page faults
 * and copies), and each new array counted as new external memory towards a collection.
 */

import { GrowableWords } from "./record-pool.js";

const MAX_CLASSES = 32;

export class HolderPool {
  /** Chunk storage; a new view when it grows, so re-read it after `alloc`. */
  words: Uint32Array;
  #top = 0;
  readonly #freeHeads = new Int32Array(MAX_CLASSES).fill(-1);
  readonly #store: GrowableWords;

  /** `maxWords`: the reservation (the default is the most a buffer can take). */
  constructor(initialWords = 1024, maxWords?: number) {
    this.#store = new GrowableWords(
      initialWords * 4,
      maxWords === undefined ? undefined : maxWords * 4,
    );
    this.words = this.#store.words;
  }

  /** Offset of a free chunk of `size` words (a power of two ≥ 2). */
  alloc(size: number): number {
    const cls = 31 - Math.clz32(size);
    const head = this.#freeHeads[cls]!;
    if (head >= 0) {
      this.#freeHeads[cls] = this.words[head]! | 0;
      return head;
    }
    const off = this.#top;
    if (off + size > this.words.length) {
      // 1.5× while the reservation allows, then what is left of it: the pool fills its
      // reservation before it says it is full.
      const grown = this.#store.grow(4 * (off + size), 4 * Math.ceil(this.words.length * 1.5));
      if (!grown) throw new RangeError(`holder pool full (${off} words)`);
      this.words = this.#store.words;
    }
    this.#top = off + size;
    return off;
  }

  /** Returns a chunk of `size` words to its free list. */
  free(off: number, size: number): void {
    const cls = 31 - Math.clz32(size);
    this.words[off] = this.#freeHeads[cls]! >>> 0;
    this.#freeHeads[cls] = off;
  }

  /** Words in use or free-listed (the high-water mark). */
  get usedWords(): number {
    return this.#top;
  }
}

/** Chunk size for `count` ≥ 2 holders: the next power of two. */
export function chunkSize(count: number): number {
  return 1 << (32 - Math.clz32(count - 1));
}
