/**
 * Per-worker maps from engine block hash to node, for all workers in one open-addressing
 * table keyed by (worker slot, hash). Each entry also records the tiers in which that
 * worker holds the block under that hash. Engine hashes arrive as normalised strings;
 * `engine-hash-key.ts` turns them into two 32-bit words so nothing here retains a string.
 *
 * Entry layout (struct of arrays): `hi`, `lo` (the hash, or an interned id), `node`, and
 * `meta = worker << 4 | kind << 3 | tierMask`. Freed entries have `meta = FREE` and link
 * the free list through `node`.
 */

const MAX_LOAD = 0.75;
const EMPTY = -1;
/** `meta` of a freed entry (no live entry has all bits set: workers are < 2^16). */
export const FREE = 0xffffffff;

export class EngineHashTable {
  hi: Uint32Array;
  lo: Uint32Array;
  meta: Uint32Array;
  node: Int32Array;
  /** Live entries. */
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
    this.hi = new Uint32Array(cap);
    this.lo = new Uint32Array(cap);
    this.meta = new Uint32Array(cap).fill(FREE);
    this.node = new Int32Array(cap);
    const bits = 32 - Math.clz32(cap * 2 - 1);
    this.#slots = new Int32Array(1 << bits).fill(EMPTY);
    this.#shift = 32 - bits;
    this.#mask = (1 << bits) - 1;
  }

  /** Entries ever allocated (live or freed): scan `[0, top)` to visit every entry. */
  get top(): number {
    return this.#top;
  }

  /** Entry of (worker, kind, hash), or −1. `wk` is `worker << 1 | kind`. */
  find(wk: number, hi: number, lo: number): number {
    const slots = this.#slots;
    const mask = this.#mask;
    let i = slotOf(wk, hi, lo, this.#shift);
    for (;;) {
      const e = slots[i]!;
      if (e === EMPTY) return EMPTY;
      if (this.lo[e] === lo && this.hi[e] === hi && this.meta[e]! >>> 3 === wk) return e;
      i = (i + 1) & mask;
    }
  }

  /** Adds an entry that is not present; returns its id. */
  insert(wk: number, hi: number, lo: number, node: number, tierMask: number): number {
    let e = this.#freeHead;
    if (e !== EMPTY) {
      this.#freeHead = this.node[e]!;
    } else {
      if (this.#top === this.#capacity) this.#growPool();
      e = this.#top++;
    }
    this.hi[e] = hi;
    this.lo[e] = lo;
    this.meta[e] = ((wk << 3) | tierMask) >>> 0;
    this.node[e] = node;
    this.live++;
    if (this.live > this.#slots.length * MAX_LOAD) this.#growTable();
    const slots = this.#slots;
    let i = slotOf(wk, hi, lo, this.#shift);
    while (slots[i] !== EMPTY) i = (i + 1) & this.#mask;
    slots[i] = e;
    return e;
  }

  remove(e: number): void {
    const slots = this.#slots;
    const mask = this.#mask;
    const shift = this.#shift;
    let i = this.#home(e, shift);
    while (slots[i] !== e) i = (i + 1) & mask;
    for (let j = (i + 1) & mask; ; j = (j + 1) & mask) {
      const m = slots[j]!;
      if (m === EMPTY) break;
      const home = this.#home(m, shift);
      if (((j - home) & mask) >= ((j - i) & mask)) {
        slots[i] = m;
        i = j;
      }
    }
    slots[i] = EMPTY;
    this.meta[e] = FREE;
    this.node[e] = this.#freeHead;
    this.#freeHead = e;
    this.live--;
  }

  /** Bytes held by the typed arrays. */
  get capacityBytes(): number {
    return this.#capacity * 16 + this.#slots.length * 4;
  }

  #home(e: number, shift: number): number {
    return slotOf(this.meta[e]! >>> 3, this.hi[e]!, this.lo[e]!, shift);
  }

  #growPool(): void {
    const cap = Math.ceil(this.#capacity * 1.5);
    const hi = new Uint32Array(cap);
    hi.set(this.hi);
    const lo = new Uint32Array(cap);
    lo.set(this.lo);
    const meta = new Uint32Array(cap).fill(FREE);
    meta.set(this.meta);
    const node = new Int32Array(cap);
    node.set(this.node);
    this.hi = hi;
    this.lo = lo;
    this.meta = meta;
    this.node = node;
    this.#capacity = cap;
  }

  #growTable(): void {
    const old = this.#slots;
    const size = old.length * 2;
    const slots = new Int32Array(size).fill(EMPTY);
    const mask = size - 1;
    const shift = this.#shift - 1;
    for (let s = 0; s < old.length; s++) {
      const e = old[s]!;
      if (e === EMPTY) continue;
      let i = this.#home(e, shift);
      while (slots[i] !== EMPTY) i = (i + 1) & mask;
      slots[i] = e;
    }
    this.#slots = slots;
    this.#mask = mask;
    this.#shift = shift;
  }
}

/** Mixes (worker, kind, hash) onto the table's top bits; engine hashes may be small ints. */
function slotOf(wk: number, hi: number, lo: number, shift: number): number {
  let h = Math.imul(hi ^ Math.imul(wk, 0x27d4eb2d), 0x85ebca6b) ^ lo;
  h = Math.imul(h ^ (h >>> 15), 0x2c1b3c6d);
  h ^= h >>> 12;
  return Math.imul(h, 0x9e3779b1) >>> shift;
}
