/**
 * The simulated engine's block hashes: 64-bit chained hashes of (parent hash, block tokens,
 * LoRA name), salted with a per-process seed like vLLM's NONE_HASH / PYTHONHASHSEED, so the
 * values are opaque to a router (it cannot recompute them from tokens and must map them).
 *
 * Two independent 32-bit murmur3-style lanes give the 64 bits without BigInt on the hot
 * path; a hash is carried as a 16-hex-digit string (`hi` then `lo`), which is also a fast
 * Map key. `hashToBigInt` converts for the wire (unsigned, like vLLM ≥ 0.10.2).
 */

import { engineHashFromU32Pair } from "../protocol/engine-hash.js";
import { fmix32 } from "../util/fmix32.js";

/** A block hash as 16 lowercase hex digits. Engine-side only; never a router key. */
export type SimBlockHash = string;

/**
 * 16 hex digits of (hi, lo): the engine-hash formatter (one flat `fromCharCode` string,
 * which Map lookups on the replay hot path need not flatten).
 */
export function hex16(hi: number, lo: number): string {
  return engineHashFromU32Pair(hi, lo);
}

function hexNibble(c: number): number {
  return c <= 57 ? c - 48 : c - 87;
}

/** The 32-bit value of 8 hex digits of `s` from `at`. */
function parseHex8(s: string, at: number): number {
  let v = 0;
  for (let i = at; i < at + 8; i++) v = (v << 4) | hexNibble(s.charCodeAt(i));
  return v >>> 0;
}

function round(h: number, k: number): number {
  k = Math.imul(k, 0xcc9e2d51);
  k = (k << 15) | (k >>> 17);
  k = Math.imul(k, 0x1b873593);
  h ^= k;
  h = (h << 13) | (h >>> 19);
  return (Math.imul(h, 5) + 0xe6546b64) | 0;
}

function stringHash32(s: string, seed: number): number {
  let h = seed | 0;
  for (let i = 0; i < s.length; i++) h = round(h, s.charCodeAt(i));
  return fmix32(h ^ s.length);
}

/** Seeded chained block hasher. One per simulated engine process. */
export class BlockHasher {
  readonly #seedA: number;
  readonly #seedB: number;
  /** The root "parent" of every first block (vLLM's random NONE_HASH). */
  readonly #rootHi: number;
  readonly #rootLo: number;
  readonly #loraCache = new Map<string, [number, number]>();

  /** @param seed any 32-bit integer; equal seeds give equal hashes (tests, reproducible runs). */
  constructor(seed: number) {
    this.#seedA = fmix32((seed ^ 0x243f6a88) >>> 0);
    this.#seedB = fmix32((seed ^ 0x85a308d3) + 0x13198a2e);
    this.#rootHi = fmix32(this.#seedA ^ 0x03707344);
    this.#rootLo = fmix32(this.#seedB ^ 0xa4093822);
  }

  /** Halves of the last `hashInto` result (unsigned 32-bit). */
  hi = 0;
  lo = 0;

  /**
   * Hash of the block `tokens[start, start + size)` whose parent is `parent`
   * (null = first block of a sequence).
   */
  hashBlock(
    parent: SimBlockHash | null,
    tokens: ArrayLike<number>,
    start: number,
    size: number,
    loraName: string | null,
  ): SimBlockHash {
    if (parent === null) this.hashInto(false, 0, 0, tokens, start, size, loraName);
    else {
      this.hashInto(
        true,
        parseHex8(parent, 0),
        parseHex8(parent, 8),
        tokens,
        start,
        size,
        loraName,
      );
    }
    return hex16(this.hi, this.lo);
  }

  /**
   * The same hash from the parent's halves, into `hi` / `lo` (no string: the cache's hot
   * path). `hasParent` false = first block of a sequence.
   */
  hashInto(
    hasParent: boolean,
    parentHi: number,
    parentLo: number,
    tokens: ArrayLike<number>,
    start: number,
    size: number,
    loraName: string | null,
  ): void {
    const pHi = hasParent ? parentHi : this.#rootHi;
    const pLo = hasParent ? parentLo : this.#rootLo;
    let a = round(round(this.#seedA, pHi), pLo);
    let b = round(round(this.#seedB, pLo), pHi ^ 0x5bd1e995);
    const end = start + size;
    for (let i = start; i < end; i++) {
      const t = tokens[i]!;
      a = round(a, t);
      b = round(b, t ^ 0x9e3779b9);
    }
    if (loraName !== null) {
      const [la, lb] = this.#loraHash(loraName);
      a = round(a, la);
      b = round(b, lb);
    }
    a = fmix32(a ^ size);
    b = fmix32(b ^ Math.imul(size, 0x27d4eb2f));
    // Cross the lanes so neither half is a function of one lane only.
    const hi = fmix32(a ^ Math.imul(b, 0x165667b1));
    this.hi = hi;
    this.lo = fmix32(b ^ Math.imul(a, 0x9e3779b1) ^ hi);
  }

  #loraHash(name: string): [number, number] {
    let h = this.#loraCache.get(name);
    if (h === undefined) {
      h = [stringHash32(name, this.#seedA), stringHash32(name, this.#seedB ^ 0x7f4a7c15)];
      this.#loraCache.set(name, h);
    }
    return h;
  }
}

/** The unsigned 64-bit value of a hash, for the wire. */
export function hashToBigInt(hash: SimBlockHash): bigint {
  return BigInt(`0x${hash}`);
}
