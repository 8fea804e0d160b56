/**
 * MurmurHash3 x86_128 (Austin Appleby's public-domain algorithm), the mixer behind the
 * router's block keys. Chosen because it is a published, SMHasher-clean hash built only
 * from 32-bit multiplies and rotations (so `Math.imul` runs it without BigInt), and
 * because any language has an implementation to cross-check `docs/block-keys.md` with.
 *
 * This file is the byte-oriented reference form, used for LoRA roots and by the tests
 * that pin the word-oriented hot path in `block-key.ts` to it bit for bit. The hot path
 * shares no code with it on purpose: an independent reference is what makes that check
 * worth something (and `block-key.ts` keeps its constants module-local for speed).
 */

import { fmix32 } from "../util/fmix32.js";

const C1 = 0x239b961b;
const C2 = 0xab0e9789;
const C3 = 0x38b34ae5;
const C4 = 0xa1e38b93;

function rotl(x: number, r: number): number {
  return (x << r) | (x >>> (32 - r));
}

function word(bytes: Uint8Array, i: number): number {
  return bytes[i]! | (bytes[i + 1]! << 8) | (bytes[i + 2]! << 16) | (bytes[i + 3]! << 24);
}

/**
 * MurmurHash3_x86_128 of `bytes` with a 32-bit `seed`, as the four output words
 * `[h1, h2, h3, h4]` (unsigned). Not for hot paths: it allocates its result.
 */
export function murmur3X86x128(bytes: Uint8Array, seed: number): [number, number, number, number] {
  const len = bytes.length;
  const nblocks = len >>> 4;
  let h1 = seed | 0;
  let h2 = seed | 0;
  let h3 = seed | 0;
  let h4 = seed | 0;
  for (let b = 0; b < nblocks; b++) {
    const i = b << 4;
    let k1 = word(bytes, i);
    let k2 = word(bytes, i + 4);
    let k3 = word(bytes, i + 8);
    let k4 = word(bytes, i + 12);
    k1 = Math.imul(rotl(Math.imul(k1, C1), 15), C2);
    h1 ^= k1;
    h1 = (Math.imul(rotl(h1, 19) + h2, 5) + 0x561ccd1b) | 0;
    k2 = Math.imul(rotl(Math.imul(k2, C2), 16), C3);
    h2 ^= k2;
    h2 = (Math.imul(rotl(h2, 17) + h3, 5) + 0x0bcaa747) | 0;
    k3 = Math.imul(rotl(Math.imul(k3, C3), 17), C4);
    h3 ^= k3;
    h3 = (Math.imul(rotl(h3, 15) + h4, 5) + 0x96cd1c35) | 0;
    k4 = Math.imul(rotl(Math.imul(k4, C4), 18), C1);
    h4 ^= k4;
    h4 = (Math.imul(rotl(h4, 13) + h1, 5) + 0x32ac3b17) | 0;
  }
  const t = nblocks << 4;
  const rest = len & 15;
  let k1 = 0;
  let k2 = 0;
  let k3 = 0;
  let k4 = 0;
  for (let j = rest - 1; j >= 0; j--) {
    const v = bytes[t + j]! << ((j & 3) * 8);
    if (j >= 12) k4 ^= v;
    else if (j >= 8) k3 ^= v;
    else if (j >= 4) k2 ^= v;
    else k1 ^= v;
  }
  if (rest > 12) h4 ^= Math.imul(rotl(Math.imul(k4, C4), 18), C1);
  if (rest > 8) h3 ^= Math.imul(rotl(Math.imul(k3, C3), 17), C4);
  if (rest > 4) h2 ^= Math.imul(rotl(Math.imul(k2, C2), 16), C3);
  if (rest > 0) h1 ^= Math.imul(rotl(Math.imul(k1, C1), 15), C2);
  h1 ^= len;
  h2 ^= len;
  h3 ^= len;
  h4 ^= len;
  h1 = (h1 + h2 + h3 + h4) | 0;
  h2 = (h2 + h1) | 0;
  h3 = (h3 + h1) | 0;
  h4 = (h4 + h1) | 0;
  h1 = fmix32(h1);
  h2 = fmix32(h2);
  h3 = fmix32(h3);
  h4 = fmix32(h4);
  h1 = (h1 + h2 + h3 + h4) | 0;
  h2 = (h2 + h1) | 0;
  h3 = (h3 + h1) | 0;
  h4 = (h4 + h1) | 0;
  return [h1 >>> 0, h2 >>> 0, h3 >>> 0, h4 >>> 0];
}
