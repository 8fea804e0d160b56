/**
 * The free block queue of a paged KV cache, after vLLM's `FreeKVCacheBlockQueue`: a
 * doubly linked list over block ids, in eviction order. The head is taken first
 * (least recently freed), freed blocks join the tail, and a block hit by a new request
 * is unlinked from the middle in O(1). Typed arrays keep it allocation-free.
 */

const NONE = -1;

export class FreeBlockQueue {
  readonly #prev: Int32Array;
  readonly #next: Int32Array;
  readonly #inQueue: Uint8Array;
  #head = NONE;
  #tail = NONE;
  #size = 0;

  /** @param capacity number of block ids (0 … capacity − 1); the queue starts empty. */
  constructor(capacity: number) {
    this.#prev = new Int32Array(capacity).fill(NONE);
    this.#next = new Int32Array(capacity).fill(NONE);
    this.#inQueue = new Uint8Array(capacity);
  }

  get size(): number {
    return this.#size;
  }

  has(block: number): boolean {
    return this.#inQueue[block] === 1;
  }

  /** Append at the tail (evicted last). */
  push(block: number): void {
    if (this.#inQueue[block] === 1) throw new Error(`block ${block} is already free`);
    this.#inQueue[block] = 1;
    this.#prev[block] = this.#tail;
    this.#next[block] = NONE;
    if (this.#tail === NONE) this.#head = block;
    else this.#next[this.#tail] = block;
    this.#tail = block;
    this.#size++;
  }

  /** Take the head (the next block to reuse). Throws when empty: callers check `size`. */
  shift(): number {
    const block = this.#head;
    if (block === NONE) throw new Error("no free blocks");
    this.remove(block);
    return block;
  }

  /** Unlink a block from anywhere in the queue. */
  remove(block: number): void {
    if (this.#inQueue[block] !== 1) throw new Error(`block ${block} is not free`);
    const p = this.#prev[block]!;
    const n = this.#next[block]!;
    if (p === NONE) this.#head = n;
    else this.#next[p] = n;
    if (n === NONE) this.#tail = p;
    else this.#prev[n] = p;
    this.#prev[block] = NONE;
    this.#next[block] = NONE;
    this.#inQueue[block] = 0;
    this.#size--;
  }

  /** Block ids from head to tail (tests, debugging). */
  toArray(): number[] {
    const out: number[] = [];
    for (let b = this.#head; b !== NONE; b = this.#next[b]!) out.push(b);
    return out;
  }
}
