/**
 * Turns an `EngineBlockHash` (a normalised string, see protocol/engine-hash.ts) into the
 * fixed-size key the engine-hash table stores, without keeping the string:
 *
 * - integer hashes (16 hex digits, by far the common case) → kind 0, the 64-bit value
 *   as (hi, lo), parsed without allocating;
 * - anything else (binary digests "b:…", Mooncake strings "s:…") → kind 1, lo = a small
 *   interned id, reference-counted by the table entries that use it.
 *
 * Both are exact: two different hashes never share a key.
 */

import type { EngineBlockHash } from "../protocol/engine-hash.js";

export const KIND_INT = 0;
export const KIND_INTERNED = 1;

const HEX = new Int8Array(128).fill(-1);
for (let c = 0; c < 10; c++) HEX[48 + c] = c;
for (let c = 0; c < 6; c++) HEX[97 + c] = 10 + c;

export class EngineHashKeys {
  /** Output of the last successful `parse`. */
  kind = 0;
  hi = 0;
  lo = 0;
  readonly #ids = new Map<string, number>();
  #strings: (string | undefined)[] = [];
  #refs: number[] = [];
  #freeIds: number[] = [];

  /**
   * Parses `hash` into `kind`, `hi`, `lo`. With `intern` false, a non-integer hash that
   * was never interned returns false (no entry can hold it); with `intern` true it gets
   * an id (the caller must `retain` it if it stores an entry with it).
   */
  parse(hash: EngineBlockHash, intern: boolean): boolean {
    if (hash.length === 16) {
      let hi = 0;
      let lo = 0;
      let bad = 0;
      for (let i = 0; i < 8; i++) {
        const c = hash.charCodeAt(i);
        const v = c < 128 ? HEX[c]! : -1;
        bad |= v;
        hi = (hi << 4) | v;
      }
      for (let i = 8; i < 16; i++) {
        const c = hash.charCodeAt(i);
        const v = c < 128 ? HEX[c]! : -1;
        bad |= v;
        lo = (lo << 4) | v;
      }
      if (bad >= 0) {
        this.kind = KIND_INT;
        this.hi = hi >>> 0;
        this.lo = lo >>> 0;
        return true;
      }
    }
    let id = this.#ids.get(hash);
    if (id === undefined) {
      if (!intern) return false;
      id = this.#freeIds.pop() ?? this.#strings.length;
      this.#ids.set(hash, id);
      this.#strings[id] = hash;
      this.#refs[id] = 0;
    }
    this.kind = KIND_INTERNED;
    this.hi = 0;
    this.lo = id;
    return true;
  }

  retain(id: number): void {
    this.#refs[id]!++;
  }

  release(id: number): void {
    const refs = --this.#refs[id]!;
    if (refs > 0) return;
    const s = this.#strings[id];
    if (s !== undefined) this.#ids.delete(s);
    this.#strings[id] = undefined;
    this.#freeIds.push(id);
  }

  /** Interned strings currently referenced (or just parsed). */
  get internedCount(): number {
    return this.#ids.size;
  }
}
