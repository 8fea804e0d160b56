/**
 * The radix tree's nodes, one per distinct chained block key, as a struct-of-arrays pool
 * in typed arrays plus an open-addressing table from the 64-bit key to the node id.
 * Plain objects and Maps per node cost several hundred bytes each; this costs about 30.
 *
 * Because a block key already encodes its whole prefix (it is chained), a child is found
 * by its key alone: the tree links (parent, child count) only serve pruning.
 *
 * Holders: each node lists the workers holding it as packed words
 * `worker << 4 | flags` (flags: tier bits, alias bit; see `radix-tree.ts`). One holder
 * is stored inline; two or more live in a `HolderPool` chunk that `holder` points to.
 *
 * The typed arrays are public for the hot loops in `radix-tree.ts`; treat them as
 * read-only outside this file, and re-read them after any call that may grow the pool.
 */

import { chunkSize, HolderPool } from "./holder-pool.js";

const MAX_LOAD = 0.75;
const EMPTY = -1;

export class NodeStore {
  keyHi: Uint32Array;
  keyLo: Uint32Array;
  /** Parent node id (−1 = child of a root); the free-list link for freed ids. */
  parent: Int32Array;
  /** Number of live child nodes. */
  children: Uint32Array;
  holderCount: Uint16Array;
  /** The single holder word, or the offset of the holder chunk when count ≥ 2. */
  holder: Uint32Array;
  readonly pool = new HolderPool();
  /** Live nodes. */
  live = 0;
  #capacity: number;
  #top = 0;
  #freeHead = EMPTY;
  #slots: Int32Array;
  #shift: number;
  #mask: number;

  constructor(initialCapacity = 1024) {
    const cap = Math.max(16, initialCapacity);
    this.#capacity = cap;
    this.keyHi = new Uint32Array(cap);
    this.keyLo = new Uint32Array(cap);
    this.parent = new Int32Array(cap);
    this.children = new Uint32Array(cap);
    this.holderCount = new Uint16Array(cap);
    this.holder = new Uint32Array(cap);
    const bits = 32 - Math.clz32(cap * 2 - 1);
    this.#slots = new Int32Array(1 << bits).fill(EMPTY);
    this.#shift = 32 - bits;
    this.#mask = (1 << bits) - 1;
  }

  /** Node id of a key, or −1. */
  find(hi: number, lo: number): number {
    const slots = this.#slots;
    const keyHi = this.keyHi;
    const keyLo = this.keyLo;
    const mask = this.#mask;
    let i = slotOf(hi, lo, this.#shift);
    for (;;) {
      const n = slots[i]!;
      if (n === EMPTY) return EMPTY;
      if (keyLo[n] === lo && keyHi[n] === hi) return n;
      i = (i + 1) & mask;
    }
  }

  /** Adds a node for a key that is not present, under `parent` (−1 = at a root). */
  create(hi: number, lo: number, parent: number): number {
    let n = this.#freeHead;
    if (n !== EMPTY) {
      this.#freeHead = this.parent[n]!;
    } else {
      if (this.#top === this.#capacity) this.#growPool();
      n = this.#top++;
    }
    this.keyHi[n] = hi;
    this.keyLo[n] = lo;
    this.parent[n] = parent;
    this.children[n] = 0;
    this.holderCount[n] = 0;
    this.holder[n] = 0;
    if (parent !== EMPTY) this.children[parent]!++;
    this.live++;
    if (this.live > this.#slots.length * MAX_LOAD) this.#growTable();
    const slots = this.#slots;
    let i = slotOf(hi, lo, this.#shift);
    while (slots[i] !== EMPTY) i = (i + 1) & this.#mask;
    slots[i] = n;
    return n;
  }

  /** Frees a node without holders or children; returns its parent (−1 at a root). */
  free(n: number): number {
    const slots = this.#slots;
    const mask = this.#mask;
    const shift = this.#shift;
    let i = slotOf(this.keyHi[n]!, this.keyLo[n]!, shift);
    while (slots[i] !== n) i = (i + 1) & mask;
    // Backward-shift deletion keeps probe chains intact without tombstones.
    for (let j = (i + 1) & mask; ; j = (j + 1) & mask) {
      const m = slots[j]!;
      if (m === EMPTY) break;
      const home = slotOf(this.keyHi[m]!, this.keyLo[m]!, shift);
      if (((j - home) & mask) >= ((j - i) & mask)) {
        slots[i] = m;
        i = j;
      }
    }
    slots[i] = EMPTY;
    const p = this.parent[n]!;
    if (p !== EMPTY) this.children[p]!--;
    this.parent[n] = this.#freeHead;
    this.#freeHead = n;
    this.live--;
    return p;
  }

  /** Index of worker `w` among the holders of `n`, or −1. */
  holderIndex(n: number, w: number): number {
    const count = this.holderCount[n]!;
    if (count === 1) return this.holder[n]! >>> 4 === w ? 0 : -1;
    const words = this.pool.words;
    const off = this.holder[n]!;
    for (let k = 0; k < count; k++) if (words[off + k]! >>> 4 === w) return k;
    return -1;
  }

  holderWord(n: number, k: number): number {
    return this.holderCount[n] === 1 ? this.holder[n]! : this.pool.words[this.holder[n]! + k]!;
  }

  setHolderWord(n: number, k: number, word: number): void {
    if (this.holderCount[n] === 1) this.holder[n] = word;
    else this.pool.words[this.holder[n]! + k] = word;
  }

  addHolder(n: number, word: number): void {
    const count = this.holderCount[n]!;
    const pool = this.pool;
    if (count === 0) {
      this.holder[n] = word;
    } else if (count === 1) {
      const off = pool.alloc(2);
      pool.words[off] = this.holder[n]!;
      pool.words[off + 1] = word;
      this.holder[n] = off;
    } else {
      let off = this.holder[n]!;
      const size = chunkSize(count);
      if (count === size) {
        const moved = pool.alloc(size * 2);
        pool.words.copyWithin(moved, off, off + count);
        pool.free(off, size);
        off = moved;
        this.holder[n] = off;
      }
      pool.words[off + count] = word;
    }
    this.holderCount[n] = count + 1;
  }

  removeHolder(n: number, k: number): void {
    const count = this.holderCount[n]!;
    const pool = this.pool;
    if (count === 1) {
      this.holder[n] = 0;
    } else if (count === 2) {
      const off = this.holder[n]!;
      this.holder[n] = pool.words[off + 1 - k]!;
      pool.free(off, 2);
    } else {
      const off = this.holder[n]!;
      pool.words[off + k] = pool.words[off + count - 1]!;
      const size = chunkSize(count);
      if (chunkSize(count - 1) < size) {
        const moved = pool.alloc(size / 2);
        pool.words.copyWithin(moved, off, off + count - 1);
        pool.free(off, size);
        this.holder[n] = moved;
      }
    }
    this.holderCount[n] = count - 1;
  }

  /** Bytes held by the typed arrays (capacity, not just live nodes). */
  get capacityBytes(): number {
    return this.#capacity * 22 + this.#slots.length * 4 + this.pool.words.length * 4;
  }

  #growPool(): void {
    const cap = Math.ceil(this.#capacity * 1.5);
    this.keyHi = grow(this.keyHi, new Uint32Array(cap));
    this.keyLo = grow(this.keyLo, new Uint32Array(cap));
    this.parent = grow(this.parent, new Int32Array(cap));
    this.children = grow(this.children, new Uint32Array(cap));
    this.holderCount = grow(this.holderCount, new Uint16Array(cap));
    this.holder = grow(this.holder, new Uint32Array(cap));
    this.#capacity = cap;
  }

  #growTable(): void {
    const old = this.#slots;
    const size = old.length * 2;
    const slots = new Int32Array(size).fill(EMPTY);
    const mask = size - 1;
    const shift = this.#shift - 1;
    for (let s = 0; s < old.length; s++) {
      const n = old[s]!;
      if (n === EMPTY) continue;
      let i = slotOf(this.keyHi[n]!, this.keyLo[n]!, shift);
      while (slots[i] !== EMPTY) i = (i + 1) & mask;
      slots[i] = n;
    }
    this.#slots = slots;
    this.#mask = mask;
    this.#shift = shift;
  }
}

/** Fibonacci hashing of the 64-bit key onto the table's top bits. */
function slotOf(hi: number, lo: number, shift: number): number {
  return Math.imul(lo ^ Math.imul(hi, 0x85ebca6b), 0x9e3779b1) >>> shift;
}

function grow<T extends Uint32Array | Int32Array | Uint16Array>(from: T, to: T): T {
  to.set(from);
  return to;
}
