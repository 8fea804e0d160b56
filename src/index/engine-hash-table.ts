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

import { doubled, SlotTable } from "./slot-table.js";

const STRIDE = 4;
const HI = 0;
const LO = 1;
const META = 2;
const NODE = 3;

/** `meta` of a freed entry (no live entry has all bits set: workers are < 2^16). */
export const FREE = 0xffffffff;

export class EngineHashTable {
  /** Live entries. */
  live = 0;
  #rec: Uint32Array;
  #capacity: number;
  #top = 0;
  #freeHead = -1;
  /** Key hash → entry id (see slot-table.ts). */
  readonly #table: SlotTable;

  constructor(initialCapacity = 1024) {
    const cap = Math.max(16, initialCapacity);
    this.#capacity = cap;
    this.#rec = new Uint32Array(cap * STRIDE);
    this.#table = new SlotTable(cap);
  }

  /** Entries ever allocated (live or freed): scan `[0, top)` to visit every entry. */
  get top(): number {
    return this.#top;
  }

  /** Entry of (worker, kind, hash), or −1. `wk` is `worker << 1 | kind`. */
  find(wk: number, hi: number, lo: number): number {
    const t = this.#table;
    const slots = t.slots;
    const rec = this.#rec;
    const mask = t.mask;
    const h = hashOf(wk, hi, lo);
    for (let i = h >>> t.shift; ; i = (i + 1) & mask) {
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
      if (this.#top === this.#capacity) {
        this.#rec = doubled(this.#rec);
        this.#capacity *= 2;
      }
      e = this.#top++;
    }
    const rec = this.#rec;
    const r = e * STRIDE;
    rec[r + HI] = hi;
    rec[r + LO] = lo;
    rec[r + META] = (wk << 3) | tierMask;
    rec[r + NODE] = node;
    this.live++;
    this.#table.insert(e, hashOf(wk, hi, lo), this.live);
    return e;
  }

  remove(e: number): void {
    const r = e * STRIDE;
    const rec = this.#rec;
    this.#table.remove(e, hashOf(rec[r + META]! >>> 3, rec[r + HI]!, rec[r + LO]!));
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
    return this.#rec.byteLength + this.#table.byteLength;
  }
}

/** 32-bit hash of (worker, kind, hash), well mixed: engine hashes may be small ints. */
function hashOf(wk: number, hi: number, lo: number): number {
  let h = Math.imul(hi ^ Math.imul(wk, 0x27d4eb2d), 0x85ebca6b) ^ lo;
  h = Math.imul(h ^ (h >>> 15), 0x2c1b3c6d);
  h ^= h >>> 12;
  return Math.imul(h, 0x9e3779b1) >>> 0;
}
