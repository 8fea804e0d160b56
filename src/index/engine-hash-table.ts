/**
 * Per-worker maps from engine block hash to node, for all workers in one open-addressing
 * table keyed by (worker slot, hash). Each entry also records the tiers in which that
 * worker holds the block under that hash. Engine hashes arrive as normalised strings;
 * `engine-hash-key.ts` turns them into two 32-bit words so nothing here retains a string.
 *
 * Entries are 6-word records `[hi, lo, meta, node, older, newer]` in a `RecordPool`, with
 * `meta = worker << 4 | kind << 3 | tierMask` (`wk = worker << 1 | kind` is the key part).
 * Freed entries have `meta = FREE` and link the free list through `node`.
 *
 * `older` / `newer` (entry id + 1, 0 = none) chain live entries from the least recently
 * stored to the most recently stored: the order in which the index cap evicts.
 */

import { bufferFor, copyInto, RecordPool } from "./record-pool.js";
import { SlotTable, TOMB } from "./slot-table.js";

const STRIDE = 6;
const HI = 0;
const LO = 1;
const META = 2;
const NODE = 3;
const OLDER = 4;
const NEWER = 5;
/** Low bits of a key's hash added to its home slot: its worker's place in its group of 8. */
const SPREAD = 7;

/** `meta` of a freed entry (no live entry has all bits set: workers are < 2^16). */
export const FREE = 0xffffffff;

/**
 * Where `copyRecords` puts an entry's fields (words); `older` / `newer` are entry id + 1,
 * and `oldest` of the table starts the chain.
 */
export const ENTRY_LAYOUT = {
  stride: STRIDE,
  hi: HI,
  lo: LO,
  meta: META,
  node: NODE,
  older: OLDER,
  newer: NEWER,
} as const;

export class EngineHashTable {
  readonly #records: RecordPool;
  /** Key hash → entry id (see slot-table.ts). */
  readonly #table: SlotTable;
  /** Oldest and newest live entry, id + 1 (0 = none). */
  #oldest = 0;
  #newest = 0;
  /**
   * The last `find` that missed: its key, the key's hash and the empty slot of `slots`
   * where the probe stopped, so that `insert` of that key right after places it there
   * without hashing or probing again. Any change forgets it (`#missSlots = null`).
   */
  #missWk = 0;
  #missHi = 0;
  #missLo = 0;
  #missH = 0;
  #missAt = 0;
  #missSlots: Int32Array | null = null;

  constructor(initialCapacity = 1024) {
    this.#records = new RecordPool(STRIDE, NODE, initialCapacity);
    this.#table = new SlotTable(Math.max(16, initialCapacity), SPREAD);
  }

  /** Live entries. */
  get live(): number {
    return this.#records.live;
  }

  /** Entries ever allocated (live or freed): scan `[0, top)` to visit every entry. */
  get top(): number {
    return this.#records.top;
  }

  /** The least recently stored live entry, or −1. */
  get oldest(): number {
    return this.#oldest - 1;
  }

  /**
   * Entry of (worker, kind, hash), or −1. `wk` is `worker << 1 | kind`; `hi`, `lo` are
   * the key's words, signed or not (compared as int32; pass them signed so they do not
   * box, see engine-hash-key.ts).
   */
  find(wk: number, hi: number, lo: number): number {
    hi |= 0;
    lo |= 0;
    const t = this.#table;
    const h = hashOf(wk, hi, lo);
    const e = this.#probe(t.slots, t.mask, t.shift, h, wk, hi, lo);
    if (e >= 0) return e;
    if (t.old !== null) {
      const o = this.#probe(t.old, t.oldMask, t.oldShift, h, wk, hi, lo);
      if (o >= 0) return o;
    }
    this.#missWk = wk;
    this.#missHi = hi;
    this.#missLo = lo;
    this.#missH = h;
    this.#missAt = -1 - e;
    this.#missSlots = t.slots;
    return -1;
  }

  /** Like `NodeStore.warm`: loads the home slot of (wk, hi, lo) ahead of `find`. */
  warm(wk: number, hi: number, lo: number): number {
    const t = this.#table;
    const h = hashOf(wk, hi | 0, lo | 0);
    return t.slots[2 * (((h >>> t.shift) & ~SPREAD) | (h & SPREAD))]!;
  }

  /**
   * After `warm` of the same key: when the home slot names an entry, loads its record and
   * returns its node (a guess, for warming the node next; reads only).
   */
  warmRecord(wk: number, hi: number, lo: number): number {
    const t = this.#table;
    const h = hashOf(wk, hi | 0, lo | 0);
    const id = t.slots[2 * (((h >>> t.shift) & ~SPREAD) | (h & SPREAD))]!;
    if (id <= 0) return -1;
    return this.#records.rec[(id - 1) * STRIDE + NODE]! | 0;
  }

  /** Entry id of the key, or −1 − (the empty slot where the probe stopped). */
  #probe(
    slots: Int32Array,
    mask: number,
    shift: number,
    h: number,
    wk: number,
    hi: number,
    lo: number,
  ) {
    const rec = this.#records.rec;
    for (let i = ((h >>> shift) & ~SPREAD) | (h & SPREAD); ; i = (i + 1) & mask) {
      const id = slots[2 * i]!;
      if (id === 0) return -1 - i;
      if (slots[2 * i + 1] !== h || id === TOMB) continue;
      const r = (id - 1) * STRIDE;
      if ((rec[r + LO]! | 0) === lo && (rec[r + HI]! | 0) === hi && rec[r + META]! >>> 3 === wk) {
        return id - 1;
      }
    }
  }

  /**
   * Adds an entry that is not present (as the newest); returns its id. Right after a
   * `find` of the same key that missed, it goes where that probe stopped.
   */
  insert(wk: number, hi: number, lo: number, node: number, tierMask: number): number {
    hi |= 0;
    lo |= 0;
    let h: number;
    let at = -1;
    if (
      this.#missSlots === this.#table.slots &&
      this.#missLo === lo &&
      this.#missHi === hi &&
      this.#missWk === wk
    ) {
      h = this.#missH;
      at = this.#missAt;
    } else h = hashOf(wk, hi, lo);
    this.#missSlots = null;
    const records = this.#records;
    const e = records.alloc();
    const rec = records.rec;
    const r = e * STRIDE;
    rec[r + HI] = hi;
    rec[r + LO] = lo;
    rec[r + META] = (wk << 3) | tierMask;
    rec[r + NODE] = node;
    this.#append(e);
    this.#table.insert(e, h, records.live, at);
    return e;
  }

  remove(e: number): void {
    this.#missSlots = null;
    const r = e * STRIDE;
    const rec = this.#records.rec;
    this.#table.remove(e, hashOf(rec[r + META]! >>> 3, rec[r + HI]! | 0, rec[r + LO]! | 0));
    this.#unlink(e);
    rec[r + META] = FREE;
    this.#records.free(e);
  }

  /** Entry `e` was stored again: it becomes the newest. */
  touch(e: number): void {
    if (this.#newest === e + 1) return;
    this.#unlink(e);
    this.#append(e);
  }

  meta(e: number): number {
    return this.#records.rec[e * STRIDE + META]!;
  }

  setMeta(e: number, meta: number): void {
    this.#records.rec[e * STRIDE + META] = meta;
  }

  node(e: number): number {
    return this.#records.rec[e * STRIDE + NODE]!;
  }

  setNode(e: number, node: number): void {
    this.#records.rec[e * STRIDE + NODE] = node;
  }

  /** The low word of entry `e`'s key (as int32). */
  lo(e: number): number {
    return this.#records.rec[e * STRIDE + LO]! | 0;
  }

  /** A copy of the entry records `[0, top)` (layout: `ENTRY_LAYOUT`), for a snapshot. */
  /** `into` if it can take `copyRecords` now, else a new buffer with room to spare. */
  copyBuffer(into?: Uint32Array): Uint32Array {
    return bufferFor(this.#records.top * STRIDE, into);
  }

  copyRecords(into?: Uint32Array): Uint32Array {
    return copyInto(this.#records.rec, this.#records.top * STRIDE, into);
  }

  /** The records `[0, top)` in place (a view: valid until the next change), for a copy in steps. */
  recordsView(): Uint32Array {
    return this.#records.rec.subarray(0, this.#records.top * STRIDE);
  }

  /** Bytes held by the typed arrays. */
  get capacityBytes(): number {
    return this.#records.byteLength + this.#table.byteLength;
  }

  /** Bytes written in its growable pool (the records; see record-pool.ts). */
  get poolBytes(): number {
    return this.#records.usedBytes;
  }

  #append(e: number): void {
    const rec = this.#records.rec;
    const r = e * STRIDE;
    rec[r + OLDER] = this.#newest;
    rec[r + NEWER] = 0;
    if (this.#newest !== 0) rec[(this.#newest - 1) * STRIDE + NEWER] = e + 1;
    else this.#oldest = e + 1;
    this.#newest = e + 1;
  }

  #unlink(e: number): void {
    const rec = this.#records.rec;
    const r = e * STRIDE;
    const older = rec[r + OLDER]!;
    const newer = rec[r + NEWER]!;
    if (older !== 0) rec[(older - 1) * STRIDE + NEWER] = newer;
    else this.#oldest = newer;
    if (newer !== 0) rec[(newer - 1) * STRIDE + OLDER] = older;
    else this.#newest = older;
  }
}

/**
 * 32-bit hash of (worker, kind, hash), well mixed: engine hashes may be small ints. As
 * int32 (the slot tables' form); the home slot is `((h >>> shift) & ~SPREAD) | (h & SPREAD)`.
 *
 * The top 24 bits hash (engine hash, worker slot >> 3) only, and the low 3 bits are the
 * worker slot's last 3: the entries of eight neighbouring worker slots under one engine
 * hash get eight neighbouring homes, so storing a block that nearby workers already hold
 * under the same hash (a fleet-wide prefix; replicas of one worker) finds its slot's cache
 * line already loaded. Bits 3–7 hash the whole key, so slot hashes still tell most keys
 * of one group apart without reading their records.
 */
function hashOf(wk: number, hi: number, lo: number): number {
  return (mix(wk >>> 4, hi, lo) & ~0xff) | (mix(wk, hi, lo) & 0xf8) | ((wk >>> 1) & SPREAD);
}
function mix(wk: number, hi: number, lo: number): number {
  let h = Math.imul(hi ^ Math.imul(wk, 0x27d4eb2d), 0x85ebca6b) ^ lo;
  h = Math.imul(h ^ (h >>> 15), 0x2c1b3c6d);
  h ^= h >>> 12;
  return Math.imul(h, 0x9e3779b1);
}
