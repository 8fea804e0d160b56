/**
 * The open-addressing slot array shared by the index's two hash tables (`node-store.ts`,
 * `engine-hash-table.ts`): slot i is `[record id + 1 (0 = empty), 32-bit hash]`, linear
 * probing from `hash >>> shift`, backward-shift deletion (no tombstones). Keeping the hash
 * in the slot means probes rarely touch records and growing or deleting never does.
 *
 * Growing is incremental, so no insert pays for rehashing millions of slots at once (at
 * 4M records that took 0.1–0.4 s of event loop): past the load limit a table twice the
 * size becomes current and the old one (`old`) is migrated a few slots per insert
 * (`migrateStep`). Meanwhile a record is in exactly one of them: lookups probe `slots`
 * and then `old`; removing from `old` leaves a tombstone (`TOMB`) so its probe chains
 * stay intact (the old array is dropped once migrated, tombstones with it). A lookup that
 * misses probes both (the old table at its full load, from a cold cache line), so the
 * window is kept short: at most `MIGRATE_INSERTS` inserts, or `MAX_MIGRATE_STEP` slots per
 * insert for large tables (an insert in a window at 2–8M slots: ~5 µs p50, up to 40 µs
 * p99, mostly first touches of the new table). At 4 slots per insert a third of all
 * inserts fell in a window; in `bench:fleet` (every stored block a new entry, so every
 * `find` before its `insert` a miss) those double probes were ~45 % of the entry table's
 * probe steps.
 *
 * Slots are `Int32Array`s and hashes int32 (the same bits as the unsigned hash): values
 * that fit a small integer never box on their way through calls (see engine-hash-key.ts).
 *
 * The owners keep their `find` loops themselves (they compare their own record fields);
 * this class does the placing, removing and growing they had in common.
 *
 * `spread` (0, or 2^k − 1): the home of hash h is `((h >>> shift) & ~spread) | (h & spread)`
 * (an aligned run of spread + 1 slots picked by the top bits, the low bits pick within it), so
 * an owner can give keys that share their top bits neighbouring homes rather than one (engine-hash-table.ts: one engine hash of eight neighbouring workers).
 */

const MAX_LOAD = 0.75;
/**
 * A growth's old table is migrated over `MIGRATE_INSERTS` inserts, up to
 * `MAX_MIGRATE_STEP` slots per insert (then over more inserts), and at least
 * `MIN_MIGRATE_STEP` (≥ 2: what finishing before the new table fills needs).
 */
const MIGRATE_INSERTS = 64;
const MIN_MIGRATE_STEP = 4;
const MAX_MIGRATE_STEP = 256;

/** Old slots migrated per insert while an old table of `oldSlots` slots is migrated. */
export function migrateStep(oldSlots: number): number {
  return Math.min(
    MAX_MIGRATE_STEP,
    Math.max(MIN_MIGRATE_STEP, Math.ceil(oldSlots / MIGRATE_INSERTS)),
  );
}
/** The id word of a removed slot of the old table while it is migrated. */
export const TOMB = -1;

export class SlotTable {
  slots: Int32Array;
  /** Home slot of hash h: `((h >>> shift) & ~spread) | (h & spread)`. */
  shift: number;
  mask: number;
  /** The previous, smaller table while it is migrated into `slots`; else null. */
  old: Int32Array | null = null;
  oldShift = 0;
  oldMask = 0;
  readonly spread: number;
  #cursor = 0;
  /** Slots migrated per insert while `old` is migrated (see `migrateStep`). */
  #step = MIN_MIGRATE_STEP;

  /** Room for about `capacity` records before the first growth. */
  constructor(capacity: number, spread = 0) {
    this.spread = spread;
    const bits = 32 - Math.clz32(capacity * 2 - 1);
    this.slots = new Int32Array(2 << bits);
    this.shift = 32 - bits;
    this.mask = (1 << bits) - 1;
  }

  /**
   * Places record `id` (not present) under hash `h`; grows first if `live` needs it.
   * `at` (else −1): the empty slot of `slots` where a probe for the record's key just
   * stopped, with no change to the table since; the record goes there unless it grows.
   */
  insert(id: number, h: number, live: number, at = -1): void {
    if (this.old === null && live > (this.mask + 1) * MAX_LOAD) {
      this.#grow();
      at = -1;
    }
    if (at >= 0) {
      this.slots[2 * at] = id + 1;
      this.slots[2 * at + 1] = h | 0;
    } else place(this.slots, this.mask, this.shift, this.spread, id + 1, h | 0);
    // Migrating after placing is the same: the slot was the key's first empty one.
    if (this.old !== null) this.#migrate(this.#step);
  }

  /** Removes record `id`, placed under hash `h`. */
  remove(id: number, h: number): void {
    h |= 0;
    const old = this.old;
    if (old !== null) {
      // Not yet migrated? Then it is in the old table: leave a tombstone there.
      const mask = this.oldMask;
      for (
        let i = ((h >>> this.oldShift) & ~this.spread) | (h & this.spread);
        ;
        i = (i + 1) & mask
      ) {
        const v = old[2 * i]!;
        if (v === 0) break;
        if (v === id + 1) {
          old[2 * i] = TOMB;
          return;
        }
      }
    }
    const slots = this.slots;
    const mask = this.mask;
    const shift = this.shift;
    const spread = this.spread;
    let i = ((h >>> shift) & ~spread) | (h & spread);
    for (let n = 0; slots[2 * i] !== id + 1; i = (i + 1) & mask) {
      // Only a broken table gets here: fail rather than loop for ever.
      if (++n > mask) throw new Error(`slot table: record ${id} is not where its hash says`);
    }
    // Backward-shift deletion keeps probe chains intact without tombstones.
    for (let j = (i + 1) & mask; ; j = (j + 1) & mask) {
      const next = slots[2 * j]!;
      if (next === 0) break;
      const hj = slots[2 * j + 1]!;
      const home = ((hj >>> shift) & ~spread) | (hj & spread);
      if (((j - home) & mask) >= ((j - i) & mask)) {
        slots[2 * i] = next;
        slots[2 * i + 1] = slots[2 * j + 1]!;
        i = j;
      }
    }
    slots[2 * i] = 0;
  }

  get byteLength(): number {
    return this.slots.byteLength + (this.old?.byteLength ?? 0);
  }

  #grow(): void {
    this.old = this.slots;
    this.oldMask = this.mask;
    this.oldShift = this.shift;
    this.#cursor = 0;
    this.#step = migrateStep(this.mask + 1);
    const size = (this.mask + 1) * 2;
    this.slots = new Int32Array(2 * size);
    this.mask = size - 1;
    this.shift -= 1;
  }

  /** Moves up to `n` old slots into the current table. */
  #migrate(n: number): void {
    const old = this.old!;
    const end = Math.min(old.length >>> 1, this.#cursor + n);
    for (let s = this.#cursor; s < end; s++) {
      const v = old[2 * s]!;
      if (v === 0) continue; // empty slots stay empty: they end probe chains
      if (v !== TOMB) place(this.slots, this.mask, this.shift, this.spread, v, old[2 * s + 1]!);
      old[2 * s] = TOMB; // migrated: lookups must not find it here any more
    }
    this.#cursor = end;
    if (end === old.length >>> 1) this.old = null;
  }
}

function place(
  slots: Int32Array,
  mask: number,
  shift: number,
  spread: number,
  v: number,
  h: number,
): void {
  let i = ((h >>> shift) & ~spread) | (h & spread);
  while (slots[2 * i] !== 0) i = (i + 1) & mask;
  slots[2 * i] = v;
  slots[2 * i + 1] = h;
}
