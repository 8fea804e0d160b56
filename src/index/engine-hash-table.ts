/**
 * Per-worker maps from engine block hash to node, for all workers in one open-addressing
 * table keyed by (worker slot, hash). Each entry also records the tiers in which that
 * worker holds the block under that hash. Engine hashes arrive as normalised strings;
 * `engine-hash-key.ts` turns them into two 32-bit words so nothing here retains a string.
 *
 * Entries are 4-word records `[hi, lo, meta, node]` in one Uint32Array, with
 * `meta = worker << 4 | kind << 3 | tierMask` (`wk = worker << 1 | kind` is the key part).
 * Freed entries have `meta = FREE` and link the free list through `node`.
 */

const STRIDE = 4;
const HI = 0;
const LO = 1;
const META = 2;
const NODE = 3;

const MAX_LOAD = 0.75;
/** `meta` of a freed entry (no live entry has all bits set: workers are < 2^16). */
export const FREE = 0xffffffff;

export class EngineHashTable {
  /** Live entries. */
  live = 0;
  #rec: Uint32Array;
  #capacity: number;
  #top = 0;
  #freeHead = -1;
  /** Slot i: `[entry id + 1 (0 = empty), 32-bit hash of the key]` (see node-store.ts). */
  #slots: Uint32Array;
  #shift: number;
  #mask: number;

  constructor(initialCapacity = 1024) {
    const cap = Math.max(16, initialCapacity);
    this.#capacity = cap;
    this.#rec = new Uint32Array(cap * STRIDE);
    const bits = 32 - Math.clz32(cap * 2 - 1);
    this.#slots = new Uint32Array(2 << bits);
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
    const rec = this.#rec;
    const mask = this.#mask;
    const h = hashOf(wk, hi, lo);
    for (let i = h >>> this.#shift; ; i = (i + 1) & mask) {
      const id = slots[2 * i]!;
      if (id === 0) return -1;
      if (slots[2 * i + 1] !== h) continue;
      const r = (id - 1) * STRIDE;
      if (rec[r + LO] === lo && rec[r + HI] === hi && rec[r + META]! >>> 3 === wk) return id - 1;
    }
  }

  /** Adds an entry that is not present; returns its id. */
  insert(wk: number, hi: number, lo: number, node: number, tierMask: number): number {
    let e = this.#freeHead;
    if (e >= 0) {
      this.#freeHead = this.#rec[e * STRIDE + NODE]! | 0;
    } else {
      if (this.#top === this.#capacity) this.#growPool();
      e = this.#top++;
    }
    const rec = this.#rec;
    const r = e * STRIDE;
    rec[r + HI] = hi;
    rec[r + LO] = lo;
    rec[r + META] = (wk << 3) | tierMask;
    rec[r + NODE] = node;
    this.live++;
    if (this.live > (this.#mask + 1) * MAX_LOAD) this.#growTable();
    const slots = this.#slots;
    const mask = this.#mask;
    const h = hashOf(wk, hi, lo);
    let i = h >>> this.#shift;
    while (slots[2 * i] !== 0) i = (i + 1) & mask;
    slots[2 * i] = e + 1;
    slots[2 * i + 1] = h;
    return e;
  }

  remove(e: number): void {
    const slots = this.#slots;
    const mask = this.#mask;
    const shift = this.#shift;
    const r = e * STRIDE;
    const rec = this.#rec;
    let i = hashOf(rec[r + META]! >>> 3, rec[r + HI]!, rec[r + LO]!) >>> shift;
    while (slots[2 * i] !== e + 1) i = (i + 1) & mask;
    for (let j = (i + 1) & mask; ; j = (j + 1) & mask) {
      const id = slots[2 * j]!;
      if (id === 0) break;
      const home = slots[2 * j + 1]! >>> shift;
      if (((j - home) & mask) >= ((j - i) & mask)) {
        slots[2 * i] = id;
        slots[2 * i + 1] = slots[2 * j + 1]!;
        i = j;
      }
    }
    slots[2 * i] = 0;
    rec[r + META] = FREE;
    rec[r + NODE] = this.#freeHead;
    this.#freeHead = e;
    this.live--;
  }

  meta(e: number): number {
    return this.#rec[e * STRIDE + META]!;
  }

  setMeta(e: number, meta: number): void {
    this.#rec[e * STRIDE + META] = meta;
  }

  node(e: number): number {
    return this.#rec[e * STRIDE + NODE]!;
  }

  setNode(e: number, node: number): void {
    this.#rec[e * STRIDE + NODE] = node;
  }

  lo(e: number): number {
    return this.#rec[e * STRIDE + LO]!;
  }

  /** Bytes held by the typed arrays. */
  get capacityBytes(): number {
    return this.#rec.byteLength + this.#slots.byteLength;
  }

  #growPool(): void {
    const cap = this.#capacity * 2;
    const rec = new Uint32Array(cap * STRIDE);
    rec.set(this.#rec);
    this.#rec = rec;
    this.#capacity = cap;
  }

  #growTable(): void {
    const old = this.#slots;
    const size = (this.#mask + 1) * 2;
    const slots = new Uint32Array(2 * size);
    const mask = size - 1;
    const shift = this.#shift - 1;
    for (let s = 0; s < old.length; s += 2) {
      const id = old[s]!;
      if (id === 0) continue;
      const h = old[s + 1]!;
      let i = h >>> shift;
      while (slots[2 * i] !== 0) i = (i + 1) & mask;
      slots[2 * i] = id;
      slots[2 * i + 1] = h;
    }
    this.#slots = slots;
    this.#mask = mask;
    this.#shift = shift;
  }
}

/** 32-bit hash of (worker, kind, hash), well mixed: engine hashes may be small ints. */
function hashOf(wk: number, hi: number, lo: number): number {
  let h = Math.imul(hi ^ Math.imul(wk, 0x27d4eb2d), 0x85ebca6b) ^ lo;
  h = Math.imul(h ^ (h >>> 15), 0x2c1b3c6d);
  h ^= h >>> 12;
  return Math.imul(h, 0x9e3779b1) >>> 0;
}
