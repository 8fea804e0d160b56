/**
 * Dense small-int slots for worker keys, so node holder lists store a 16-bit slot instead
 * of a string, plus per-slot numeric columns (blocks held, and the scratch run counters
 * of `findMatches`). The public order is by worker key, so results do not depend on the
 * order in which workers were first seen; the order is kept as workers come and go, and
 * `sortMatched` puts a lookup's few matched slots in it without visiting the fleet.
 *
 * A cleared worker's slot is *retired*: it leaves the key map at once (the worker's key
 * gets a fresh slot when it comes back), while its old entries are reclaimed in slices;
 * only then is the slot `recycle`d for reuse. See radix-tree.ts on reclamation.
 */

import type { WorkerKey } from "../protocol/worker.js";

/** Holder words keep the slot in 16 bits (see node-store.ts). */
export const MAX_WORKERS = 65536;

export class WorkerSlots {
  /** Distinct blocks held by each slot, any tier. */
  blocks = new Int32Array(16);
  /** Engine-hash entries of each slot that include the GPU tier. */
  gpuEntries = new Int32Array(16);
  /** Most GPU entries each slot's engine can hold (0 = unknown): more is lost removals. */
  gpuCap = new Int32Array(16);
  /** Scratch for findMatches: leading blocks held per tier group. */
  gpuRun = new Int32Array(16);
  hostRun = new Int32Array(16);
  diskRun = new Int32Array(16);
  /** Scratch for findMatches: the slots it matched, and the same in key order. */
  touched = new Int32Array(16);
  #sorted = new Int32Array(16);
  #packed = new Float64Array(16);
  /**
   * Each live slot's position in `order()`, when `#ranked`: rebuilt by `sortMatched` (its
   * only reader) after workers came or went. Kept up to date on every change it cost
   * O(fleet) per new worker: registering 7,000 workers re-ranked ~25M slots.
   */
  #rank = new Int32Array(16);
  #ranked = true;
  readonly #slotOf = new Map<WorkerKey, number>();
  #keys: (WorkerKey | undefined)[] = [];
  readonly #free: number[] = [];
  /** Live slots sorted by key, kept sorted as workers come and go (no re-sort). */
  readonly #order: number[] = [];

  get count(): number {
    return this.#slotOf.size;
  }

  slotOf(key: WorkerKey): number | undefined {
    return this.#slotOf.get(key);
  }

  keyOf(slot: number): WorkerKey {
    return this.#keys[slot]!;
  }

  /** Worker key of every slot, undefined for free or retired ones (a copy). */
  keysBySlot(): (WorkerKey | undefined)[] {
    return this.#keys.slice();
  }

  /** The slot of `key`, registering it if new. */
  ensure(key: WorkerKey): number {
    const known = this.#slotOf.get(key);
    if (known !== undefined) return known;
    let slot = this.#free.pop();
    if (slot === undefined) {
      slot = this.#keys.length;
      if (slot >= MAX_WORKERS) {
        throw new RangeError(`the index holds at most ${MAX_WORKERS} workers; cannot add ${key}`);
      }
      this.#keys.push(undefined);
      if (slot >= this.blocks.length) this.#grow(this.blocks.length * 2);
    }
    this.#keys[slot] = key;
    this.#slotOf.set(key, slot);
    this.blocks[slot] = 0;
    this.gpuEntries[slot] = 0;
    this.gpuCap[slot] = 0;
    // A recycled slot's disk run was −1 (retired); findMatches needs 0 on live slots.
    this.gpuRun[slot] = 0;
    this.hostRun[slot] = 0;
    this.diskRun[slot] = 0;
    this.#enter(slot, key);
    return slot;
  }

  /** The slot leaves its key (which may get a new slot); not reusable until `recycle`. */
  retire(slot: number): void {
    const key = this.#keys[slot];
    if (key === undefined) return;
    // Found by its key (the order is by key), so before the key leaves the slot.
    this.#order.splice(this.#position(key), 1);
    this.#ranked = false;
    this.#slotOf.delete(key);
    this.#keys[slot] = undefined;
  }

  /** A retired slot whose entries are all gone becomes free for reuse. */
  recycle(slot: number): void {
    this.blocks[slot] = 0;
    this.gpuEntries[slot] = 0;
    this.#free.push(slot);
  }

  /** Live slots sorted by worker key. */
  order(): readonly number[] {
    return this.#order;
  }

  /**
   * `touched[0, count)` (distinct live slots whose `diskRun` is > 0, every other live
   * slot's being 0) in key order: sorted by rank, O(count log count), or picked out of
   * the order when they are a large share of the fleet. Returns scratch.
   */
  sortMatched(count: number): Int32Array {
    const touched = this.touched;
    if (count === 1) return touched;
    const order = this.#order;
    const out = this.#sorted;
    if (count * 16 >= order.length) {
      const disk = this.diskRun;
      let j = 0;
      for (let i = 0; i < order.length; i++) if (disk[order[i]!]! > 0) out[j++] = order[i]!;
      return out;
    }
    // Rank and slot packed into one number: a numeric sort without a comparator.
    const packed = this.#packed;
    const rank = this.#rank;
    if (!this.#ranked) {
      for (let i = 0; i < order.length; i++) rank[order[i]!] = i;
      this.#ranked = true;
    }
    for (let i = 0; i < count; i++) packed[i] = rank[touched[i]!]! * MAX_WORKERS + touched[i]!;
    packed.subarray(0, count).sort();
    for (let i = 0; i < count; i++) out[i] = packed[i]! % MAX_WORKERS;
    return out;
  }

  /** Inserts a new live slot into the key order (binary search, shift; ranks go stale). */
  #enter(slot: number, key: WorkerKey): void {
    this.#order.splice(this.#position(key), 0, slot);
    this.#ranked = false;
  }

  /** Where `key` is or would go in the key order (binary search). */
  #position(key: WorkerKey): number {
    const order = this.#order;
    const keys = this.#keys;
    let lo = 0;
    let hi = order.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (keys[order[mid]!]! < key) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  #grow(size: number): void {
    const widen = (a: Int32Array<ArrayBuffer>): Int32Array<ArrayBuffer> => {
      const b = new Int32Array(size);
      b.set(a);
      return b;
    };
    this.blocks = widen(this.blocks);
    this.gpuEntries = widen(this.gpuEntries);
    this.gpuCap = widen(this.gpuCap);
    this.gpuRun = widen(this.gpuRun);
    this.hostRun = widen(this.hostRun);
    this.diskRun = widen(this.diskRun);
    this.touched = widen(this.touched);
    this.#sorted = widen(this.#sorted);
    this.#rank = widen(this.#rank);
    this.#packed = new Float64Array(size);
  }
}
