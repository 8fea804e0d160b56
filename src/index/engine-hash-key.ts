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
 *
 * `hi` and `lo` are kept as *signed* 32-bit integers (the same bits as the unsigned
 * words): V8 keeps int32 values unboxed across calls and in object fields, whereas an
 * unsigned word ≥ 2^31 passed to a function or returned from one is a heap number — an
 * allocation per hash on the ingest path (about 25 bytes of garbage per stored block
 * before this). The tables compare words as int32 (`x | 0`) for the same reason.
 */

import { type EngineBlockHash, engineHashFromU32Pair } from "../protocol/engine-hash.js";

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
    if (hash.length === 16 && this.#parseHex(hash)) return true;
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

  /**
   * 16 lowercase hex digits → (hi, lo), kind 0. Unrolled with one validity check at the
   * end (the hot path of every stored and removed block): any char outside [0-9a-f]
   * (including non-ASCII, caught by the OR of the raw codes) makes it return false.
   */
  #parseHex(s: string): boolean {
    const t = HEX;
    const c0 = s.charCodeAt(0);
    const c1 = s.charCodeAt(1);
    const c2 = s.charCodeAt(2);
    const c3 = s.charCodeAt(3);
    const c4 = s.charCodeAt(4);
    const c5 = s.charCodeAt(5);
    const c6 = s.charCodeAt(6);
    const c7 = s.charCodeAt(7);
    const c8 = s.charCodeAt(8);
    const c9 = s.charCodeAt(9);
    const c10 = s.charCodeAt(10);
    const c11 = s.charCodeAt(11);
    const c12 = s.charCodeAt(12);
    const c13 = s.charCodeAt(13);
    const c14 = s.charCodeAt(14);
    const c15 = s.charCodeAt(15);
    const v0 = t[c0 & 127]!;
    const v1 = t[c1 & 127]!;
    const v2 = t[c2 & 127]!;
    const v3 = t[c3 & 127]!;
    const v4 = t[c4 & 127]!;
    const v5 = t[c5 & 127]!;
    const v6 = t[c6 & 127]!;
    const v7 = t[c7 & 127]!;
    const v8 = t[c8 & 127]!;
    const v9 = t[c9 & 127]!;
    const v10 = t[c10 & 127]!;
    const v11 = t[c11 & 127]!;
    const v12 = t[c12 & 127]!;
    const v13 = t[c13 & 127]!;
    const v14 = t[c14 & 127]!;
    const v15 = t[c15 & 127]!;
    const codes =
      c0 | c1 | c2 | c3 | c4 | c5 | c6 | c7 | c8 | c9 | c10 | c11 | c12 | c13 | c14 | c15;
    const vals =
      v0 | v1 | v2 | v3 | v4 | v5 | v6 | v7 | v8 | v9 | v10 | v11 | v12 | v13 | v14 | v15;
    if (codes > 127 || vals < 0) return false;
    this.kind = KIND_INT;
    this.hi =
      (v0 << 28) | (v1 << 24) | (v2 << 20) | (v3 << 16) | (v4 << 12) | (v5 << 8) | (v6 << 4) | v7;
    this.lo =
      (v8 << 28) |
      (v9 << 24) |
      (v10 << 20) |
      (v11 << 16) |
      (v12 << 12) |
      (v13 << 8) |
      (v14 << 4) |
      v15;
    return true;
  }

  /**
   * Sets the current key to the integer hash (hi, lo), as `parse` of its hex form would
   * (the words are kept signed: see the header).
   */
  setInt(hi: number, lo: number): void {
    this.kind = KIND_INT;
    this.hi = hi | 0;
    this.lo = lo | 0;
  }

  /** The `EngineBlockHash` of the current key (rare paths only: allocates for integers). */
  current(): EngineBlockHash {
    if (this.kind === KIND_INT) return engineHashFromU32Pair(this.hi >>> 0, this.lo >>> 0);
    return this.#strings[this.lo] as EngineBlockHash;
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

  /** The interned string of id `id` (kind 1 keys), or undefined if free. */
  stringOf(id: number): string | undefined {
    return this.#strings[id];
  }

  /**
   * Every interned string by id as of now (a copy: ids freed and reused later do not
   * change it), for a snapshot encoded over many turns. Empty when no hash is a string.
   */
  copyStrings(): readonly (string | undefined)[] {
    return this.#strings.slice();
  }

  /** Interned strings currently referenced (or just parsed). */
  get internedCount(): number {
    return this.#ids.size;
  }
}
