/**
 * MurmurHash3's 32-bit finaliser ("fmix32", Austin Appleby, public domain): full
 * avalanche of one word. The one copy for the index's murmur3, the simulator's block
 * hasher and the replay tool's token generator.
 */

/** fmix32 of `h`, as an unsigned 32-bit integer. */
export function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}
