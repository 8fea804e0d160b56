/**
 * Dense small-int slots for worker keys, so node holder lists store a 16-bit slot instead
 * of a string, plus per-slot numeric columns (blocks held, and the scratch run counters
 * of `findMatches`). The public order is by worker key, so results do not depend on the
 * order in which workers were first seen.
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
  readonly #slotOf = new Map<WorkerKey, number>();
  #keys: (WorkerKey | undefined)[] = [];
  readonly #free: number[] = [];
  #order: number[] | null = [];

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
    this.#order = null;
    return slot;
  }

  /** The slot leaves its key (which may get a new slot); not reusable until `recycle`. */
  retire(slot: number): void {
    const key = this.#keys[slot];
    if (key === undefined) return;
    this.#slotOf.delete(key);
    this.#keys[slot] = undefined;
    this.#order = null;
  }

  /** A retired slot whose entries are all gone becomes free for reuse. */
  recycle(slot: number): void {
    this.blocks[slot] = 0;
    this.gpuEntries[slot] = 0;
    this.#free.push(slot);
  }

  /** Live slots sorted by worker key (cached until the set of workers changes). */
  order(): readonly number[] {
    if (this.#order === null) {
      const keys = this.#keys;
      this.#order = [...this.#slotOf.values()].sort((a, b) =>
        keys[a]! < keys[b]! ? -1 : keys[a]! > keys[b]! ? 1 : 0,
      );
    }
    return this.#order;
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
  }
}
