/**
 * The free block queue of a paged KV cache, after vLLM's `FreeKVCacheBlockQueue`: a
 * doubly linked list over block ids, in eviction order. The head is taken first
 * (least recently freed), freed blocks join the tail, and a block hit by a new request
 * is unlinked from the middle in O(1). Typed arrays keep it allocation-free.
 *
 * Blocks never used yet are not linked: at start every block from `first` on is free in
 * id order, exactly vLLM's initial queue, and since nothing can be freed before it was
 * taken, the queue is always [untouched ids, ascending] followed by the linked list. So
 * the untouched run is a counter, and the link arrays grow with the blocks actually used
 * — a replay's "unlimited" cache of millions of blocks costs only what it touches.
 */

const NONE = -1;

export class FreeBlockQueue {
  readonly #capacity: number;
  #prev: Int32Array;
  #next: Int32Array;
  #inQueue: Uint8Array;
  /** Next untouched block id; ids in [#fresh, #capacity) are free and never used. */
  #fresh: number;
  #head = NONE;
  #tail = NONE;
  #size = 0;

  /**
   * @param capacity number of block ids (0 … capacity − 1)
   * @param first the lowest id that starts free (ids below it start in use/reserved);
   *   `capacity` = the queue starts empty
   */
  constructor(capacity: number, first = capacity) {
    this.#capacity = capacity;
    this.#fresh = Math.min(Math.max(0, first), capacity);
    const initial = Math.min(capacity, Math.max(1024, this.#fresh + 1));
    this.#prev = new Int32Array(initial).fill(NONE);
    this.#next = new Int32Array(initial).fill(NONE);
    this.#inQueue = new Uint8Array(initial);
  }

  get size(): number {
    return this.#size + (this.#capacity - this.#fresh);
  }

  has(block: number): boolean {
    return block >= this.#fresh ? block < this.#capacity : this.#inQueue[block] === 1;
  }

  /** Append at the tail (evicted last). */
  push(block: number): void {
    if (this.has(block)) throw new Error(`block ${block} is already free`);
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
    if (this.#fresh < this.#capacity) return this.#takeFresh();
    const block = this.#head;
    if (block === NONE) throw new Error("no free blocks");
    this.remove(block);
    return block;
  }

  /** Unlink a block from anywhere in the queue. */
  remove(block: number): void {
    if (block >= this.#fresh && block < this.#capacity) {
      // Only the lowest untouched id can be asked for (callers take blocks via shift).
      if (block !== this.#fresh) throw new Error(`block ${block} was never handed out`);
      this.#takeFresh();
      return;
    }
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
    for (let b = this.#fresh; b < this.#capacity; b++) out.push(b);
    for (let b = this.#head; b !== NONE; b = this.#next[b]!) out.push(b);
    return out;
  }

  #takeFresh(): number {
    const block = this.#fresh++;
    if (block >= this.#inQueue.length) this.#grow(block + 1);
    return block;
  }

  #grow(min: number): void {
    const len = Math.min(this.#capacity, Math.max(min, this.#inQueue.length * 2));
    const prev = new Int32Array(len).fill(NONE);
    const next = new Int32Array(len).fill(NONE);
    const inQueue = new Uint8Array(len);
    prev.set(this.#prev);
    next.set(this.#next);
    inQueue.set(this.#inQueue);
    this.#prev = prev;
    this.#next = next;
    this.#inQueue = inQueue;
  }
}
