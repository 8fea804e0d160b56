/**
 * The open-addressing slot array shared by the index's two hash tables (`node-store.ts`,
 * `engine-hash-table.ts`): slot i is `[record id + 1 (0 = empty), 32-bit hash]`, linear
 * probing from `hash >>> shift`, backward-shift deletion (no tombstones). Keeping the hash
 * in the slot means probes rarely touch records and growing or deleting never does.
 *
 * The owners keep their `find` loops themselves (they compare their own record fields);
 * this class does the placing, removing and growing they had in common.
 */

const MAX_LOAD = 0.75;

export class SlotTable {
  slots: Uint32Array;
  /** Home slot of hash h: `h >>> shift`. */
  shift: number;
  mask: number;

  /** Room for about `capacity` records before the first growth. */
  constructor(capacity: number) {
    const bits = 32 - Math.clz32(capacity * 2 - 1);
    this.slots = new Uint32Array(2 << bits);
    this.shift = 32 - bits;
    this.mask = (1 << bits) - 1;
  }

  /** Places record `id` (not present) under hash `h`; grows first if `live` needs it. */
  insert(id: number, h: number, live: number): void {
    if (live > (this.mask + 1) * MAX_LOAD) this.#grow();
    const slots = this.slots;
    const mask = this.mask;
    let i = h >>> this.shift;
    while (slots[2 * i] !== 0) i = (i + 1) & mask;
    slots[2 * i] = id + 1;
    slots[2 * i + 1] = h;
  }

  /** Removes record `id`, placed under hash `h`. */
  remove(id: number, h: number): void {
    const slots = this.slots;
    const mask = this.mask;
    const shift = this.shift;
    let i = h >>> shift;
    while (slots[2 * i] !== id + 1) i = (i + 1) & mask;
    // Backward-shift deletion keeps probe chains intact without tombstones.
    for (let j = (i + 1) & mask; ; j = (j + 1) & mask) {
      const next = slots[2 * j]!;
      if (next === 0) break;
      const home = slots[2 * j + 1]! >>> shift;
      if (((j - home) & mask) >= ((j - i) & mask)) {
        slots[2 * i] = next;
        slots[2 * i + 1] = slots[2 * j + 1]!;
        i = j;
      }
    }
    slots[2 * i] = 0;
  }

  get byteLength(): number {
    return this.slots.byteLength;
  }

  #grow(): void {
    const old = this.slots;
    const size = (this.mask + 1) * 2;
    const slots = new Uint32Array(2 * size);
    const mask = size - 1;
    const shift = this.shift - 1;
    for (let s = 0; s < old.length; s += 2) {
      const id = old[s]!;
      if (id === 0) continue;
      const h = old[s + 1]!;
      let i = h >>> shift;
      while (slots[2 * i] !== 0) i = (i + 1) & mask;
      slots[2 * i] = id;
      slots[2 * i + 1] = h;
    }
    this.slots = slots;
    this.mask = mask;
    this.shift = shift;
  }
}
