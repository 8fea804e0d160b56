/**
 * The router's own chained block keys (see docs/block-keys.md for the exact spec and a
 * worked vector).
 *
 *   root(lora)   = (0, 0) for the base model (null or ""), else the first two words of
 *                  MurmurHash3_x86_128(UTF-8(lora), LORA_SEED)
 *   key(i)       = first two words (h1, h2) of
 *                  MurmurHash3_x86_128(LE32(parent.hi) LE32(parent.lo) LE32(t_0) … LE32(t_{B-1}),
 *                                      BLOCK_SEED)
 *
 * with parent = key(i − 1) (root for i = 0) and t the block's token ids. Engines' own
 * hashes depend on per-process seeds, so the router cannot reuse them (wire-formats §4).
 *
 * The hot path hashes 32-bit words straight from the token array: no BigInt, no byte
 * buffer, no allocation per block. It is bit-for-bit the byte-oriented reference in
 * `murmur3.ts` (pinned by tests).
 *
 * Long file: the 16-token case is written out (`chain16`) beside the general loop; both
 * must stay bit-identical, so they live together with the spec's constants.
 */

import { murmur3X86x128 } from "./murmur3.js";
import type { BlockKeySeq } from "./types.js";

// MurmurHash3 x86_128 constants (same as murmur3.ts). Module-local on purpose: imported
// bindings can compile to getter calls under some loaders (tsx), which costs 5× here.
const C1 = 0x239b961b;
const C2 = 0xab0e9789;
const C3 = 0x38b34ae5;
const C4 = 0xa1e38b93;
const F1 = 0x85ebca6b;
const F2 = 0xc2b2ae35;

/** MurmurHash3 seed of every block hash. ASCII "kvb1". */
export const BLOCK_SEED = 0x6b766231;
/** MurmurHash3 seed of LoRA root keys. ASCII "lora". */
export const LORA_SEED = 0x6c6f7261;

const rootCache = new Map<string, readonly [number, number]>();
const ROOT_CACHE_LIMIT = 4096;
const BASE_ROOT: readonly [number, number] = Object.freeze([0, 0]) as readonly [number, number];
const utf8 = new TextEncoder();

/**
 * The name a chain is rooted at: the LoRA adapter (null = base model), and the request's
 * cache salt when there is one. vLLM folds the salt into the extra keys of the block
 * that starts at token 0 (`generate_block_hash_extra_keys`), SGLang into the whole radix
 * key (`RadixKey.extra_key`); either way every block of a salted prompt differs from the
 * unsalted one's and equals another request's with the same salt. Folding the salt into
 * the root, the parent of block 0, gives the router's keys exactly that property:
 * `root(chainName(lora, salt))` (docs/block-keys.md). The NUL keeps it apart from any
 * plain adapter name.
 */
export function chainName(adapter: string | null, cacheSalt: string | null): string | null {
  if (cacheSalt === null || cacheSalt === "") return adapter;
  return `${adapter ?? ""}\u0000salt:${cacheSalt}`;
}

/** Root key `[hi, lo]` of a LoRA adapter's chain; null or "" is the base model, `[0, 0]`. */
export function rootKey(loraName: string | null): readonly [number, number] {
  if (loraName === null || loraName === "") return BASE_ROOT;
  let root = rootCache.get(loraName);
  if (root === undefined) {
    const h = murmur3X86x128(utf8.encode(loraName), LORA_SEED);
    root = Object.freeze([h[0], h[1]]) as readonly [number, number];
    if (rootCache.size >= ROOT_CACHE_LIMIT) rootCache.clear();
    rootCache.set(loraName, root);
  }
  return root;
}

/**
 * Writes `blockCount` chained keys into `out` (interleaved hi, lo from `outOffset`),
 * starting from the parent key `(parentHi, parentLo)` and reading `blockCount × blockSize`
 * tokens of `tokens` from `tokenOffset`. Each token contributes its low 32 bits. No
 * allocation; the caller sizes `out`.
 */
export function chainBlockKeys(
  parentHi: number,
  parentLo: number,
  tokens: ArrayLike<number>,
  tokenOffset: number,
  blockCount: number,
  blockSize: number,
  out: Uint32Array,
  outOffset: number,
): void {
  if (blockSize === 16) {
    chain16(parentHi | 0, parentLo | 0, tokens, tokenOffset, blockCount, out, outOffset);
    return;
  }
  const byteLen = (blockSize + 2) * 4;
  let phi = parentHi | 0;
  let plo = parentLo | 0;
  let base = tokenOffset;
  for (let b = 0; b < blockCount; b++) {
    let h1 = BLOCK_SEED;
    let h2 = BLOCK_SEED;
    let h3 = BLOCK_SEED;
    let h4 = BLOCK_SEED;
    // Words of the message: [phi, plo, t0, t1, …]; j indexes tokens of this block.
    let j = 0;
    let k1: number;
    let k2: number;
    let k3: number;
    let k4: number;
    let rest: number;
    if (blockSize >= 2) {
      k1 = phi;
      k2 = plo;
      k3 = tokens[base]!;
      k4 = tokens[base + 1]!;
      j = 2;
      for (;;) {
        k1 = Math.imul(k1, C1);
        k1 = Math.imul((k1 << 15) | (k1 >>> 17), C2);
        h1 ^= k1;
        h1 = (h1 << 19) | (h1 >>> 13);
        h1 = (Math.imul(h1 + h2, 5) + 0x561ccd1b) | 0;
        k2 = Math.imul(k2, C2);
        k2 = Math.imul((k2 << 16) | (k2 >>> 16), C3);
        h2 ^= k2;
        h2 = (h2 << 17) | (h2 >>> 15);
        h2 = (Math.imul(h2 + h3, 5) + 0x0bcaa747) | 0;
        k3 = Math.imul(k3, C3);
        k3 = Math.imul((k3 << 17) | (k3 >>> 15), C4);
        h3 ^= k3;
        h3 = (h3 << 15) | (h3 >>> 17);
        h3 = (Math.imul(h3 + h4, 5) + 0x96cd1c35) | 0;
        k4 = Math.imul(k4, C4);
        k4 = Math.imul((k4 << 18) | (k4 >>> 14), C1);
        h4 ^= k4;
        h4 = (h4 << 13) | (h4 >>> 19);
        h4 = (Math.imul(h4 + h1, 5) + 0x32ac3b17) | 0;
        if (j + 4 > blockSize) break;
        const p = base + j;
        k1 = tokens[p]!;
        k2 = tokens[p + 1]!;
        k3 = tokens[p + 2]!;
        k4 = tokens[p + 3]!;
        j += 4;
      }
      rest = blockSize - j;
      const p = base + j;
      k1 = rest > 0 ? tokens[p]! : 0;
      k2 = rest > 1 ? tokens[p + 1]! : 0;
      k3 = rest > 2 ? tokens[p + 2]! : 0;
    } else {
      // blockSize 1: three words, all in the tail.
      k1 = phi;
      k2 = plo;
      k3 = tokens[base]!;
      rest = 3;
    }
    // Tail: `rest` (0..3) whole words in k1..k3, then finalisation.
    if (rest > 2) {
      k3 = Math.imul(k3, C3);
      h3 ^= Math.imul((k3 << 17) | (k3 >>> 15), C4);
    }
    if (rest > 1) {
      k2 = Math.imul(k2, C2);
      h2 ^= Math.imul((k2 << 16) | (k2 >>> 16), C3);
    }
    if (rest > 0) {
      k1 = Math.imul(k1, C1);
      h1 ^= Math.imul((k1 << 15) | (k1 >>> 17), C2);
    }
    const o = outOffset + 2 * b;
    finish(h1, h2, h3, h4, byteLen, out, o);
    phi = out[o]! | 0;
    plo = out[o + 1]! | 0;
    base += blockSize;
  }
}

/**
 * `chainBlockKeys` for the usual block size, 16 tokens, written out: 18 message words =
 * four full 16-byte rounds (parent hi, parent lo, t0, t1), (t2..t5), (t6..t9),
 * (t10..t13) and a two-word tail (t14, t15). Same arithmetic as the general loop, without
 * its bookkeeping.
 */
function chain16(
  phi: number,
  plo: number,
  t: ArrayLike<number>,
  tokenOffset: number,
  blockCount: number,
  out: Uint32Array,
  outOffset: number,
): void {
  let p = tokenOffset;
  for (let b = 0; b < blockCount; b++) {
    let h1 = BLOCK_SEED;
    let h2 = BLOCK_SEED;
    let h3 = BLOCK_SEED;
    let h4 = BLOCK_SEED;
    let k: number;
    // Round 1: parent hi, parent lo, t0, t1.
    k = Math.imul(phi, C1);
    h1 ^= Math.imul((k << 15) | (k >>> 17), C2);
    h1 = (h1 << 19) | (h1 >>> 13);
    h1 = (Math.imul(h1 + h2, 5) + 0x561ccd1b) | 0;
    k = Math.imul(plo, C2);
    h2 ^= Math.imul((k << 16) | (k >>> 16), C3);
    h2 = (h2 << 17) | (h2 >>> 15);
    h2 = (Math.imul(h2 + h3, 5) + 0x0bcaa747) | 0;
    k = Math.imul(t[p]!, C3);
    h3 ^= Math.imul((k << 17) | (k >>> 15), C4);
    h3 = (h3 << 15) | (h3 >>> 17);
    h3 = (Math.imul(h3 + h4, 5) + 0x96cd1c35) | 0;
    k = Math.imul(t[p + 1]!, C4);
    h4 ^= Math.imul((k << 18) | (k >>> 14), C1);
    h4 = (h4 << 13) | (h4 >>> 19);
    h4 = (Math.imul(h4 + h1, 5) + 0x32ac3b17) | 0;
    // Round 2: t2..t5.
    k = Math.imul(t[p + 2]!, C1);
    h1 ^= Math.imul((k << 15) | (k >>> 17), C2);
    h1 = (h1 << 19) | (h1 >>> 13);
    h1 = (Math.imul(h1 + h2, 5) + 0x561ccd1b) | 0;
    k = Math.imul(t[p + 3]!, C2);
    h2 ^= Math.imul((k << 16) | (k >>> 16), C3);
    h2 = (h2 << 17) | (h2 >>> 15);
    h2 = (Math.imul(h2 + h3, 5) + 0x0bcaa747) | 0;
    k = Math.imul(t[p + 4]!, C3);
    h3 ^= Math.imul((k << 17) | (k >>> 15), C4);
    h3 = (h3 << 15) | (h3 >>> 17);
    h3 = (Math.imul(h3 + h4, 5) + 0x96cd1c35) | 0;
    k = Math.imul(t[p + 5]!, C4);
    h4 ^= Math.imul((k << 18) | (k >>> 14), C1);
    h4 = (h4 << 13) | (h4 >>> 19);
    h4 = (Math.imul(h4 + h1, 5) + 0x32ac3b17) | 0;
    // Round 3: t6..t9.
    k = Math.imul(t[p + 6]!, C1);
    h1 ^= Math.imul((k << 15) | (k >>> 17), C2);
    h1 = (h1 << 19) | (h1 >>> 13);
    h1 = (Math.imul(h1 + h2, 5) + 0x561ccd1b) | 0;
    k = Math.imul(t[p + 7]!, C2);
    h2 ^= Math.imul((k << 16) | (k >>> 16), C3);
    h2 = (h2 << 17) | (h2 >>> 15);
    h2 = (Math.imul(h2 + h3, 5) + 0x0bcaa747) | 0;
    k = Math.imul(t[p + 8]!, C3);
    h3 ^= Math.imul((k << 17) | (k >>> 15), C4);
    h3 = (h3 << 15) | (h3 >>> 17);
    h3 = (Math.imul(h3 + h4, 5) + 0x96cd1c35) | 0;
    k = Math.imul(t[p + 9]!, C4);
    h4 ^= Math.imul((k << 18) | (k >>> 14), C1);
    h4 = (h4 << 13) | (h4 >>> 19);
    h4 = (Math.imul(h4 + h1, 5) + 0x32ac3b17) | 0;
    // Round 4: t10..t13.
    k = Math.imul(t[p + 10]!, C1);
    h1 ^= Math.imul((k << 15) | (k >>> 17), C2);
    h1 = (h1 << 19) | (h1 >>> 13);
    h1 = (Math.imul(h1 + h2, 5) + 0x561ccd1b) | 0;
    k = Math.imul(t[p + 11]!, C2);
    h2 ^= Math.imul((k << 16) | (k >>> 16), C3);
    h2 = (h2 << 17) | (h2 >>> 15);
    h2 = (Math.imul(h2 + h3, 5) + 0x0bcaa747) | 0;
    k = Math.imul(t[p + 12]!, C3);
    h3 ^= Math.imul((k << 17) | (k >>> 15), C4);
    h3 = (h3 << 15) | (h3 >>> 17);
    h3 = (Math.imul(h3 + h4, 5) + 0x96cd1c35) | 0;
    k = Math.imul(t[p + 13]!, C4);
    h4 ^= Math.imul((k << 18) | (k >>> 14), C1);
    h4 = (h4 << 13) | (h4 >>> 19);
    h4 = (Math.imul(h4 + h1, 5) + 0x32ac3b17) | 0;
    // Tail: t14, t15 (two words of the last, partial 16-byte block).
    k = Math.imul(t[p + 15]!, C2);
    h2 ^= Math.imul((k << 16) | (k >>> 16), C3);
    k = Math.imul(t[p + 14]!, C1);
    h1 ^= Math.imul((k << 15) | (k >>> 17), C2);
    const o = outOffset + 2 * b;
    finish(h1, h2, h3, h4, 72, out, o); // 72: the message length in bytes
    phi = out[o]! | 0;
    plo = out[o + 1]! | 0;
    p += 16;
  }
}

/**
 * MurmurHash3 x86_128's finalisation of one block's state (message length `byteLen`),
 * keeping the two words a key is made of: `out[o] = h1`, `out[o + 1] = h2`. Shared by
 * the general loop and `chain16`.
 */
function finish(
  h1: number,
  h2: number,
  h3: number,
  h4: number,
  byteLen: number,
  out: Uint32Array,
  o: number,
): void {
  h1 ^= byteLen;
  h2 ^= byteLen;
  h3 ^= byteLen;
  h4 ^= byteLen;
  h1 = (h1 + h2 + h3 + h4) | 0;
  h2 = (h2 + h1) | 0;
  h3 = (h3 + h1) | 0;
  h4 = (h4 + h1) | 0;
  h1 = fmix(h1);
  h2 = fmix(h2);
  h3 = fmix(h3);
  h4 = fmix(h4);
  h1 = (h1 + h2 + h3 + h4) | 0;
  out[o] = h1;
  out[o + 1] = (h2 + h1) | 0;
}

function fmix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, F1);
  h ^= h >>> 13;
  h = Math.imul(h, F2);
  return h ^ (h >>> 16);
}

function checkBlockSize(blockSize: number): void {
  if (!Number.isInteger(blockSize) || blockSize < 1) {
    throw new RangeError(`block size must be a positive integer, got ${blockSize}`);
  }
}

/**
 * Chained keys of every full block of `tokenIds` (a trailing partial block is ignored),
 * rooted at the LoRA adapter `loraName` (null or "" = base model).
 */
export function computeBlockKeys(
  tokenIds: ArrayLike<number>,
  blockSize: number,
  loraName: string | null,
): BlockKeySeq {
  checkBlockSize(blockSize);
  const blocks = Math.floor(tokenIds.length / blockSize);
  const out = new Uint32Array(2 * blocks);
  const root = rootKey(loraName);
  chainBlockKeys(root[0], root[1], tokenIds, 0, blocks, blockSize, out, 0);
  return out as BlockKeySeq;
}

/**
 * Keys of full blocks chained from a known parent key (e.g. a stored event whose parent
 * block is already indexed). `parent` is `[hi, lo]`.
 */
export function computeBlockKeysFrom(
  parent: readonly [number, number],
  tokenIds: ArrayLike<number>,
  blockSize: number,
): BlockKeySeq {
  checkBlockSize(blockSize);
  const blocks = Math.floor(tokenIds.length / blockSize);
  const out = new Uint32Array(2 * blocks);
  chainBlockKeys(parent[0], parent[1], tokenIds, 0, blocks, blockSize, out, 0);
  return out as BlockKeySeq;
}

/** Number of keys in a sequence. */
export function blockKeyCount(keys: BlockKeySeq): number {
  return keys.length >>> 1;
}

/** Key `i` as 16 lowercase hex digits (hi then lo), for logs, docs and tests. */
export function blockKeyHex(keys: BlockKeySeq, i: number): string {
  return (
    keys[2 * i]!.toString(16).padStart(8, "0") + keys[2 * i + 1]!.toString(16).padStart(8, "0")
  );
}
