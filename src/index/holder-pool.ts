/**
 * Storage for the holder lists of nodes held by two or more workers. Most blocks have one
 * holder, kept inline in the node; shared blocks (system prompts) keep theirs here, in
 * contiguous chunks of one big Uint32Array so `findMatches` reads them without pointer
 * chasing. Chunks come in power-of-two sizes (2, 4, 8, …) with one free list per size.
 */

const MAX_CLASSES = 32;

export class HolderPool {
  /** Chunk storage; replaced when it grows, so re-read it after `alloc`. */
  words: Uint32Array;
  #top = 0;
  readonly #freeHeads = new Int32Array(MAX_CLASSES).fill(-1);

  constructor(initialWords = 1024) {
    this.words = new Uint32Array(initialWords);
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
      const grown = new Uint32Array(Math.max(off + size, Math.ceil(this.words.length * 1.5)));
      grown.set(this.words.subarray(0, off));
      this.words = grown;
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
