/**
 * The radix tree's nodes, one per distinct chained block key, as fixed-size records in
 * one Uint32Array plus an open-addressing table from the 64-bit key to the node id.
 * Plain objects and Maps per node cost several hundred bytes each; this costs about 40,
 * and one node's fields share a cache line (ingest and lookups are cache-miss bound).
 *
 * Because a block key already encodes its whole prefix (it is chained), a child is found
 * by its key alone: the tree links (parent, child count) only serve pruning.
 *
 * Holders: each node lists the workers holding it as packed words
 * `worker << 4 | flags` (tier bits, alias bit; see `radix-tree.ts`). One holder is stored
 * inline; two or more live in a `HolderPool` chunk that the record points to.
 */

import { chunkSize, HolderPool } from "./holder-pool.js";
import { bufferFor, copyInto, RecordPool } from "./record-pool.js";
import { SlotTable, TOMB } from "./slot-table.js";

// Record layout (words).
const STRIDE = 6;
const KEY_HI = 0;
const KEY_LO = 1;
const PARENT = 2; // node id + 1 (0 = child of a root); the free-list link when freed
const CHILDREN = 3;
const COUNT = 4; // holders
const HOLDER = 5; // the single holder word, or the chunk offset when COUNT ≥ 2

/** Where `copyRecords` puts a node's fields (words; parent is node id + 1, 0 = root). */
export const NODE_LAYOUT = {
  stride: STRIDE,
  keyHi: KEY_HI,
  keyLo: KEY_LO,
  parent: PARENT,
} as const;

export class NodeStore {
  readonly pool = new HolderPool();
  readonly #records: RecordPool;
  /** Key hash → node id (see slot-table.ts). */
  readonly #table: SlotTable;

  constructor(initialCapacity = 1024) {
    this.#records = new RecordPool(STRIDE, PARENT, initialCapacity);
    this.#table = new SlotTable(Math.max(16, initialCapacity));
  }

  /** Live nodes. */
  get live(): number {
    return this.#records.live;
  }

  /** Node id of a key, or −1. */
  find(hi: number, lo: number): number {
    const t = this.#table;
    const h = hashOf(hi, lo);
    const n = this.#probe(t.slots, t.mask, t.shift, h, hi, lo);
    return n >= 0 || t.old === null ? n : this.#probe(t.old, t.oldMask, t.oldShift, h, hi, lo);
  }

  #probe(slots: Uint32Array, mask: number, shift: number, h: number, hi: number, lo: number) {
    const rec = this.#records.rec;
    for (let i = h >>> shift; ; i = (i + 1) & mask) {
      const id = slots[2 * i]!;
      if (id === 0) return -1;
      if (slots[2 * i + 1] === h && id !== TOMB) {
        const r = (id - 1) * STRIDE;
        if (rec[r + KEY_LO] === lo && rec[r + KEY_HI] === hi) return id - 1;
      }
    }
  }

  /** Adds a node for a key that is not present, under `parent` (−1 = at a root). */
  create(hi: number, lo: number, parent: number): number {
    const n = this.#records.alloc();
    const rec = this.#records.rec;
    const r = n * STRIDE;
    rec[r + KEY_HI] = hi;
    rec[r + KEY_LO] = lo;
    rec[r + PARENT] = parent + 1;
    rec[r + CHILDREN] = 0;
    rec[r + COUNT] = 0;
    rec[r + HOLDER] = 0;
    if (parent >= 0) rec[parent * STRIDE + CHILDREN]!++;
    this.#table.insert(n, hashOf(hi, lo), this.#records.live);
    return n;
  }

  /** Frees a node without holders or children; returns its parent (−1 at a root). */
  free(n: number): number {
    const rec = this.#records.rec;
    const r = n * STRIDE;
    this.#table.remove(n, hashOf(rec[r + KEY_HI]!, rec[r + KEY_LO]!));
    const p = rec[r + PARENT]! - 1;
    if (p >= 0) rec[p * STRIDE + CHILDREN]!--;
    this.#records.free(n);
    return p;
  }

  keyHi(n: number): number {
    return this.#records.rec[n * STRIDE + KEY_HI]!;
  }

  keyLo(n: number): number {
    return this.#records.rec[n * STRIDE + KEY_LO]!;
  }

  /** True when no worker holds `n` and it has no children (it can be freed). */
  isUnused(n: number): boolean {
    const r = n * STRIDE;
    return this.#records.rec[r + COUNT] === 0 && this.#records.rec[r + CHILDREN] === 0;
  }

  /**
   * The core of findMatches: walks `keys` from the root and, per worker slot, advances
   * the runs of leading blocks held in GPU (`gpu`), GPU or host (`host`) and any tier
   * (`disk`). The runs must be zero for every live worker on entry (a retired slot's
   * disk run is −1, so it never advances). Writes the slots that hold the first block
   * to `touched` (one each; only they can advance later) and returns how many.
   * Stops at the first missing key or at a block no worker can extend. Reads only the
   * holder lists of the nodes on the path; allocates nothing.
   */
  matchRuns(
    keys: Uint32Array,
    gpu: Int32Array,
    host: Int32Array,
    disk: Int32Array,
    touched: Int32Array,
  ): number {
    const rec = this.#records.rec;
    const words = this.pool.words;
    const n = keys.length >>> 1;
    let listed = 0;
    for (let i = 0; i < n; i++) {
      const node = this.find(keys[2 * i]!, keys[2 * i + 1]!);
      if (node < 0) return listed;
      const r = node * STRIDE;
      const count = rec[r + COUNT]!;
      const base = rec[r + HOLDER]!;
      let advanced = false;
      for (let k = 0; k < count; k++) {
        const word = count === 1 ? base : words[base + k]!;
        const w = word >>> 4;
        if (disk[w] !== i) continue; // a gap earlier: this worker's prefix already ended
        disk[w] = i + 1;
        if (i === 0) touched[listed++] = w;
        advanced = true;
        // Tier bits: 1 = GPU, 2 = host, 4 = disk; gpu ≤ host ≤ disk always holds.
        if ((word & 3) !== 0 && host[w] === i) {
          host[w] = i + 1;
          if ((word & 1) !== 0 && gpu[w] === i) gpu[w] = i + 1;
        }
      }
      if (!advanced) return listed;
    }
    return listed;
  }

  holderCount(n: number): number {
    return this.#records.rec[n * STRIDE + COUNT]!;
  }

  /** Index of worker `w` among the holders of `n`, or −1. */
  holderIndex(n: number, w: number): number {
    const r = n * STRIDE;
    const count = this.#records.rec[r + COUNT]!;
    const base = this.#records.rec[r + HOLDER]!;
    if (count === 1) return base >>> 4 === w ? 0 : -1;
    const words = this.pool.words;
    for (let k = 0; k < count; k++) if (words[base + k]! >>> 4 === w) return k;
    return -1;
  }

  holderWord(n: number, k: number): number {
    const r = n * STRIDE;
    const base = this.#records.rec[r + HOLDER]!;
    return this.#records.rec[r + COUNT] === 1 ? base : this.pool.words[base + k]!;
  }

  setHolderWord(n: number, k: number, word: number): void {
    const r = n * STRIDE;
    if (this.#records.rec[r + COUNT] === 1) this.#records.rec[r + HOLDER] = word;
    else this.pool.words[this.#records.rec[r + HOLDER]! + k] = word;
  }

  addHolder(n: number, word: number): void {
    const rec = this.#records.rec;
    const r = n * STRIDE;
    const count = rec[r + COUNT]!;
    const pool = this.pool;
    if (count === 0) {
      rec[r + HOLDER] = word;
    } else if (count === 1) {
      const off = pool.alloc(2);
      pool.words[off] = rec[r + HOLDER]!;
      pool.words[off + 1] = word;
      rec[r + HOLDER] = off;
    } else {
      let off = rec[r + HOLDER]!;
      const size = chunkSize(count);
      if (count === size) {
        const moved = pool.alloc(size * 2);
        pool.words.copyWithin(moved, off, off + count);
        pool.free(off, size);
        off = moved;
        rec[r + HOLDER] = off;
      }
      pool.words[off + count] = word;
    }
    rec[r + COUNT] = count + 1;
  }

  removeHolder(n: number, k: number): void {
    const rec = this.#records.rec;
    const r = n * STRIDE;
    const count = rec[r + COUNT]!;
    const pool = this.pool;
    const off = rec[r + HOLDER]!;
    if (count === 1) {
      rec[r + HOLDER] = 0;
    } else if (count === 2) {
      rec[r + HOLDER] = pool.words[off + 1 - k]!;
      pool.free(off, 2);
    } else {
      pool.words[off + k] = pool.words[off + count - 1]!;
      const size = chunkSize(count);
      if (chunkSize(count - 1) < size) {
        const moved = pool.alloc(size / 2);
        pool.words.copyWithin(moved, off, off + count - 1);
        pool.free(off, size);
        rec[r + HOLDER] = moved;
      }
    }
    rec[r + COUNT] = count - 1;
  }

  /**
   * A copy of the node records `[0, top)` (layout: `NODE_LAYOUT`; freed records hold
   * garbage), for a snapshot. One memcpy: cheap enough to take between two events.
   */
  /** `into` if it can take `copyRecords` now, else a new buffer with room to spare. */
  copyBuffer(into?: Uint32Array): Uint32Array {
    return bufferFor(this.#records.top * STRIDE, into);
  }

  copyRecords(into?: Uint32Array): Uint32Array {
    return copyInto(this.#records.rec, this.#records.top * STRIDE, into);
  }

  /** Bytes held by the typed arrays (capacity, not just live nodes). */
  get capacityBytes(): number {
    return this.#records.byteLength + this.#table.byteLength + this.pool.words.byteLength;
  }
}

/** 32-bit hash of the 64-bit key; its top bits pick the slot (Fibonacci hashing). */
function hashOf(hi: number, lo: number): number {
  return Math.imul(lo ^ Math.imul(hi, 0x85ebca6b), 0x9e3779b1) >>> 0;
}
