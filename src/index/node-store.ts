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
 * `worker << 4 | flags` (tier bits, alias bit; see `radix-tree.ts`), sorted by worker
 * slot: a holder is found by binary search (the 7,000 holders of a fleet-wide system
 * prompt were a linear scan per stored event), and `matchInto` merges a prompt's levels
 * without per-lookup marks. One holder is stored inline; two or more live in a
 * `HolderPool` chunk that the record points to.
 *
 * Long file: the lookup walk (`matchInto`) reads the records and holder chunks directly,
 * word by word, in the loop that dominates lookups; moved out, it would need the record
 * layout and pool internals exported for one caller.
 */

import { chunkSize, HolderPool } from "./holder-pool.js";
import type { MatchBuffer } from "./match-buffer.js";
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
/** Levels of a lookup's path whose slots are loaded ahead at a time (see `matchInto`). */
const WARM_AHEAD = 8;

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
  /** Where warming loads leave their result, so that they are not optimised away. */
  readonly #sink = new Int32Array(1);

  constructor(initialCapacity = 1024) {
    this.#records = new RecordPool(STRIDE, PARENT, initialCapacity);
    this.#table = new SlotTable(Math.max(16, initialCapacity));
  }

  /** Live nodes. */
  get live(): number {
    return this.#records.live;
  }

  /** Node id of a key, or −1 (words signed or not; pass them signed: see slot-table.ts). */
  find(hi: number, lo: number): number {
    hi |= 0;
    lo |= 0;
    const t = this.#table;
    const h = hashOf(hi, lo);
    const n = this.#probe(t.slots, t.mask, t.shift, h, hi, lo);
    return n >= 0 || t.old === null ? n : this.#probe(t.old, t.oldMask, t.oldShift, h, hi, lo);
  }

  /** Loads the home slots of keys `[from, min(to, from + WARM_AHEAD))` (see `matchInto`). */
  #warm(keys: Uint32Array, from: number, to: number): void {
    const t = this.#table;
    const slots = t.slots;
    const shift = t.shift;
    const end = Math.min(to, from + WARM_AHEAD);
    let sink = 0;
    for (let i = from; i < end; i++) {
      sink ^= slots[2 * (hashOf(keys[2 * i]! | 0, keys[2 * i + 1]! | 0) >>> shift)]!;
    }
    this.#sink[0] = sink;
  }

  /**
   * Loads node `n`'s record and the last word of its holder list, so that a batch's
   * nodes come into cache together (see `RadixTreeIndex`'s removal path). Reads only.
   */
  warmNode(n: number): number {
    if (n < 0 || n >= this.#records.top) return 0;
    const rec = this.#records.rec;
    const r = n * STRIDE;
    const count = rec[r + COUNT]!;
    const base = rec[r + HOLDER]!;
    return count > 1 ? this.pool.words[base + count - 1]! : base;
  }

  #probe(slots: Int32Array, mask: number, shift: number, h: number, hi: number, lo: number) {
    const rec = this.#records.rec;
    for (let i = h >>> shift; ; i = (i + 1) & mask) {
      const id = slots[2 * i]!;
      if (id === 0) return -1;
      if (slots[2 * i + 1] === h && id !== TOMB) {
        const r = (id - 1) * STRIDE;
        if ((rec[r + KEY_LO]! | 0) === lo && (rec[r + KEY_HI]! | 0) === hi) return id - 1;
      }
    }
  }

  /** Adds a node for a key that is not present, under `parent` (−1 = at a root). */
  create(hi: number, lo: number, parent: number): number {
    hi |= 0;
    lo |= 0;
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
    this.#table.remove(n, hashOf(rec[r + KEY_HI]! | 0, rec[r + KEY_LO]! | 0));
    const p = rec[r + PARENT]! - 1;
    if (p >= 0) rec[p * STRIDE + CHILDREN]!--;
    this.#records.free(n);
    return p;
  }

  /** The key's high word, as int32. */
  keyHi(n: number): number {
    return this.#records.rec[n * STRIDE + KEY_HI]! | 0;
  }

  /** The key's low word, as int32. */
  keyLo(n: number): number {
    return this.#records.rec[n * STRIDE + KEY_LO]! | 0;
  }

  /** True when no worker holds `n` and it has no children (it can be freed). */
  isUnused(n: number): boolean {
    const r = n * STRIDE;
    return this.#records.rec[r + COUNT] === 0 && this.#records.rec[r + CHILDREN] === 0;
  }

  /**
   * The core of findMatches (see match-buffer.ts for the answer's shape): the first key's
   * holder list is read in place (copied, filtered, only while `skip` flags retired slots),
   * then the second key's holders that hold the first start the deep list (binary
   * search in the sorted copy), and each further key's holders advance the deep runs,
   * kept meanwhile in the per-slot columns `gpu`/`host`/`disk` (zero for live slots on
   * entry and on return). Stops at the first missing key or at a block no worker
   * extends. Allocates nothing once `out` has grown.
   */
  matchInto(
    keys: Uint32Array,
    out: MatchBuffer,
    skip: Uint8Array | null,
    gpu: Int32Array,
    host: Int32Array,
    disk: Int32Array,
  ): void {
    const n = keys.length >>> 1;
    out.blocks = n;
    out.count = 0;
    out.deepCount = 0;
    if (n === 0) return;
    // The path's home slots are loaded ahead, WARM_AHEAD at a time, as independent loads:
    // their cache misses overlap instead of coming one level at a time. In steps, because
    // most walks stop early (a miss, or no holder going deeper): warming whole prompts
    // made such lookups 15 % slower.
    if (n > 2) this.#warm(keys, 0, n);
    const node0 = this.find(keys[0]! | 0, keys[1]! | 0);
    if (node0 < 0) return;
    const rec = this.#records.rec;
    const words = this.pool.words;
    const r0 = node0 * STRIDE;
    const count0 = rec[r0 + COUNT]!;
    const base0 = rec[r0 + HOLDER]!;
    let first: Uint32Array;
    let at = 0;
    let c = 0;
    if (count0 >= 2 && skip === null) {
      // Read in place: a block the whole fleet holds costs nothing per holder.
      first = words;
      at = base0;
      c = count0;
      out.viewFirst(words, base0, count0);
    } else {
      first = out.reserveFirst(count0);
      if (count0 === 1) {
        if (skip === null || skip[base0 >>> 4] === 0) first[c++] = base0;
      } else {
        for (let k = 0; k < count0; k++) {
          const x = words[base0 + k]!;
          if (skip![x >>> 4] === 0) first[c++] = x;
        }
      }
      out.count = c;
    }
    if (c === 0 || n < 2) return;
    // Second block: its holders that hold the first one start the deep list.
    const node1 = this.find(keys[2]! | 0, keys[3]! | 0);
    if (node1 < 0) return;
    const r1 = node1 * STRIDE;
    const count1 = rec[r1 + COUNT]!;
    const base1 = rec[r1 + HOLDER]!;
    out.reserveDeep(count1);
    const dSlot = out.deepSlot;
    const dGpu = out.deepGpu;
    const dHost = out.deepHost;
    const dDisk = out.deepDisk;
    let deep = 0;
    let lo = 0;
    for (let k = 0; k < count1; k++) {
      const x = count1 === 1 ? base1 : words[base1 + k]!;
      const w = x >>> 4;
      // Both lists are sorted by slot: search only past the previous hit.
      let hi = c;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (first[at + mid]! >>> 4 < w) lo = mid + 1;
        else hi = mid;
      }
      if (lo >= c) break;
      const y = first[at + lo]!;
      if (y >>> 4 !== w) continue;
      // Tier bits: 1 = GPU, 2 = host, 4 = disk; gpu ≤ host ≤ disk always holds.
      let h = (y & 3) !== 0 ? 1 : 0;
      let g = (y & 1) !== 0 ? 1 : 0;
      if ((x & 3) !== 0 && h === 1) {
        h = 2;
        if ((x & 1) !== 0 && g === 1) g = 2;
      }
      dSlot[deep] = w;
      dGpu[deep] = g;
      dHost[deep] = h;
      dDisk[deep] = 2;
      deep++;
    }
    out.deepCount = deep;
    if (deep === 0 || n < 3) return;
    // Further blocks: the runs live in the per-slot scratch columns (zero between calls)
    // so that each level costs one check per holder, as long as some run advances.
    for (let j = 0; j < deep; j++) {
      const w = dSlot[j]!;
      gpu[w] = dGpu[j]!;
      host[w] = dHost[j]!;
      disk[w] = 2;
    }
    for (let i = 2; i < n; i++) {
      if (i % WARM_AHEAD === 0) this.#warm(keys, i, n);
      const node = this.find(keys[2 * i]! | 0, keys[2 * i + 1]! | 0);
      if (node < 0) break;
      const r = node * STRIDE;
      const count = rec[r + COUNT]!;
      const base = rec[r + HOLDER]!;
      let advanced = false;
      for (let k = 0; k < count; k++) {
        const x = count === 1 ? base : words[base + k]!;
        const w = x >>> 4;
        if (disk[w] !== i) continue; // not deep, or its run already ended
        disk[w] = i + 1;
        advanced = true;
        if ((x & 3) !== 0 && host[w] === i) {
          host[w] = i + 1;
          if ((x & 1) !== 0 && gpu[w] === i) gpu[w] = i + 1;
        }
      }
      if (!advanced) break;
    }
    for (let j = 0; j < deep; j++) {
      const w = dSlot[j]!;
      dGpu[j] = gpu[w]!;
      dHost[j] = host[w]!;
      dDisk[j] = disk[w]!;
      gpu[w] = 0;
      host[w] = 0;
      disk[w] = 0;
    }
  }

  holderCount(n: number): number {
    return this.#records.rec[n * STRIDE + COUNT]!;
  }

  /** Index of worker `w` among the holders of `n` (sorted by slot), or −1. */
  holderIndex(n: number, w: number): number {
    const r = n * STRIDE;
    const count = this.#records.rec[r + COUNT]!;
    const base = this.#records.rec[r + HOLDER]!;
    if (count === 1) return base >>> 4 === w ? 0 : -1;
    if (count === 0) return -1;
    const k = lowerBound(this.pool.words, base, count, w);
    return k < count && this.pool.words[base + k]! >>> 4 === w ? k : -1;
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

  /** Adds a holder word (its worker not yet a holder), keeping the list sorted by slot. */
  addHolder(n: number, word: number): void {
    const rec = this.#records.rec;
    const r = n * STRIDE;
    const count = rec[r + COUNT]!;
    const pool = this.pool;
    if (count === 0) {
      rec[r + HOLDER] = word;
    } else if (count === 1) {
      const off = pool.alloc(2);
      const other = rec[r + HOLDER]!;
      const before = other >>> 4 < word >>> 4;
      pool.words[off] = before ? other : word;
      pool.words[off + 1] = before ? word : other;
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
      const words = pool.words;
      const k = lowerBound(words, off, count, word >>> 4);
      if (k < count) words.copyWithin(off + k + 1, off + k, off + count);
      words[off + k] = word;
    }
    rec[r + COUNT] = count + 1;
  }

  /** Removes the holder at index `k`, keeping the order of the others. */
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
      if (k < count - 1) pool.words.copyWithin(off + k, off + k + 1, off + count);
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

  /** The records `[0, top)` in place (a view: valid until the next change), for a copy in steps. */
  recordsView(): Uint32Array {
    return this.#records.rec.subarray(0, this.#records.top * STRIDE);
  }

  /** Bytes held by the typed arrays (capacity, not just live nodes). */
  get capacityBytes(): number {
    return this.#records.byteLength + this.#table.byteLength + this.pool.words.byteLength;
  }

  /** Bytes written in its growable pools (records, holder lists; see record-pool.ts). */
  get poolBytes(): number {
    return this.#records.usedBytes + this.pool.usedWords * 4;
  }
}

/** First index in `words[base, base + count)` whose slot (`word >>> 4`) is ≥ `w`. */
function lowerBound(words: Uint32Array, base: number, count: number, w: number): number {
  let lo = 0;
  let hi = count;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (words[base + mid]! >>> 4 < w) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** 32-bit hash (int32) of the 64-bit key; its top bits pick the slot (Fibonacci hashing). */
function hashOf(hi: number, lo: number): number {
  return Math.imul(lo ^ Math.imul(hi, 0x85ebca6b), 0x9e3779b1);
}
