/**
 * The simulated cache's "hash → blocks holding it" map (vLLM's `cached_block_hash_to_block`),
 * keyed by the two 32-bit halves of a block hash, without strings or per-entry objects.
 *
 * Each block id holds at most one hash, so the hash lives per block (`#hi`, `#lo`) and the
 * open-addressing table (linear probing, backward-shift deletion) stores only the block id
 * that hits use; further blocks with the same hash (identical blocks are not
 * de-duplicated) follow it in a per-block chain, oldest first. A JS `Map` keyed by hex
 * strings did the same at ~1.3 µs per insert with millions of entries: this is the replay's
 * innermost loop (docs/benchmarks.md, "Replay budget").
 */

const EMPTY = -1;

export class CachedBlocks {
  /** Per block id: the hash's halves, whether it holds one, the next block with it. */
  #hi: Int32Array;
  #lo: Int32Array;
  #has: Uint8Array;
  #nextSame: Int32Array;
  /** Slots of block ids (EMPTY = free); size a power of two. */
  #slots: Int32Array;
  #mask: number;
  #distinct = 0;
  #blocks = 0;

  constructor(initialBlocks = 1024) {
    const n = Math.max(16, initialBlocks);
    this.#hi = new Int32Array(n);
    this.#lo = new Int32Array(n);
    this.#has = new Uint8Array(n);
    this.#nextSame = new Int32Array(n).fill(EMPTY);
    this.#slots = new Int32Array(64).fill(EMPTY);
    this.#mask = 63;
  }

  /** Blocks registered under some hash. */
  get blocks(): number {
    return this.#blocks;
  }

  /** Distinct hashes registered. */
  get distinct(): number {
    return this.#distinct;
  }

  /** The block hits use for hash (hi, lo), or −1. */
  find(hi: number, lo: number): number {
    const s = this.#slot(hi | 0, lo | 0);
    return this.#slots[s]!;
  }

  /** Whether `block` holds a hash, and which. */
  holds(block: number): boolean {
    return block < this.#has.length && this.#has[block] === 1;
  }

  hiOf(block: number): number {
    return this.#hi[block]! >>> 0;
  }

  loOf(block: number): number {
    return this.#lo[block]! >>> 0;
  }

  /** Blocks holding the hash of `head`'s chain (`head` from `find`). */
  chainLength(head: number): number {
    let n = 0;
    for (let b = head; b !== EMPTY; b = this.#nextSame[b]!) n++;
    return n;
  }

  /** Register `block` (holding nothing) under hash (hi, lo), after any blocks already there. */
  add(block: number, hi: number, lo: number): void {
    if (block >= this.#has.length) this.#growBlocks(block + 1);
    if (this.#has[block] === 1) throw new Error(`block ${block} already holds a hash`);
    hi |= 0;
    lo |= 0;
    this.#hi[block] = hi;
    this.#lo[block] = lo;
    this.#has[block] = 1;
    this.#nextSame[block] = EMPTY;
    this.#blocks++;
    const s = this.#slot(hi, lo);
    const head = this.#slots[s]!;
    if (head !== EMPTY) {
      let b = head;
      while (this.#nextSame[b]! !== EMPTY) b = this.#nextSame[b]!;
      this.#nextSame[b] = block;
      return;
    }
    this.#slots[s] = block;
    this.#distinct++;
    if (this.#distinct * 2 > this.#slots.length) this.#rehash(this.#slots.length * 2);
  }

  /** Unregister `block` (it must hold a hash). */
  remove(block: number): void {
    if (!this.holds(block)) throw new Error(`block ${block} holds no hash`);
    const s = this.#slot(this.#hi[block]!, this.#lo[block]!);
    const head = this.#slots[s]!;
    const next = this.#nextSame[block]!;
    this.#has[block] = 0;
    this.#nextSame[block] = EMPTY;
    this.#blocks--;
    if (head !== block) {
      let b = head;
      while (this.#nextSame[b]! !== block) b = this.#nextSame[b]!;
      this.#nextSame[b] = next;
      return;
    }
    if (next !== EMPTY) {
      this.#slots[s] = next;
      return;
    }
    this.#distinct--;
    this.#deleteSlot(s);
  }

  /** Drop everything. */
  clear(): void {
    this.#has.fill(0);
    this.#nextSame.fill(EMPTY);
    this.#slots.fill(EMPTY);
    this.#distinct = 0;
    this.#blocks = 0;
  }

  /** Each hash's head block (tests, invariants). */
  *heads(): IterableIterator<number> {
    for (const b of this.#slots) if (b !== EMPTY) yield b;
  }

  #home(hi: number, lo: number): number {
    let h = Math.imul(hi ^ Math.imul(lo, 0x9e3779b1), 0x85ebca6b);
    h ^= h >>> 15;
    return h & this.#mask;
  }

  /** The slot holding hash (hi, lo), or the empty slot where it would go. */
  #slot(hi: number, lo: number): number {
    const slots = this.#slots;
    const mask = this.#mask;
    let s = this.#home(hi, lo);
    for (;;) {
      const b = slots[s]!;
      if (b === EMPTY || (this.#hi[b] === hi && this.#lo[b] === lo)) return s;
      s = (s + 1) & mask;
    }
  }

  #deleteSlot(s: number): void {
    const slots = this.#slots;
    const mask = this.#mask;
    let hole = s;
    let i = s;
    for (;;) {
      i = (i + 1) & mask;
      const b = slots[i]!;
      if (b === EMPTY) break;
      const home = this.#home(this.#hi[b]!, this.#lo[b]!);
      // Move b into the hole unless its home lies cyclically in (hole, i].
      const between = hole <= i ? home > hole && home <= i : home > hole || home <= i;
      if (!between) {
        slots[hole] = b;
        hole = i;
      }
    }
    slots[hole] = EMPTY;
  }

  #rehash(size: number): void {
    const old = this.#slots;
    this.#slots = new Int32Array(size).fill(EMPTY);
    this.#mask = size - 1;
    for (const b of old) if (b !== EMPTY) this.#slots[this.#slot(this.#hi[b]!, this.#lo[b]!)] = b;
  }

  #growBlocks(min: number): void {
    const n = Math.max(min, this.#has.length * 2);
    const hi = new Int32Array(n);
    const lo = new Int32Array(n);
    const has = new Uint8Array(n);
    const next = new Int32Array(n).fill(EMPTY);
    hi.set(this.#hi);
    lo.set(this.#lo);
    has.set(this.#has);
    next.set(this.#nextSame);
    this.#hi = hi;
    this.#lo = lo;
    this.#has = has;
    this.#nextSame = next;
  }
}
