/**
 * A lookup's answer without an object per worker (`RadixTreeIndex.matchInto`): the holder
 * words of the prompt's first block, copied in one piece, plus the few workers whose run
 * goes deeper. Every worker holding the first block matches at least that block; only
 * the "deep" ones (the holders of the second block among them, and so on) get a list
 * entry, so a lookup costs the path's length, one copy of the first block's holder list
 * and the holders of the deeper blocks: not holders × depth, and no allocation once the
 * buffer has grown. A system prompt held by the whole fleet is one memcpy.
 *
 * Reading it: worker slot `s` (= `first[k] >>> 4`) matches
 * - `deepDisk[j]` / `deepHost[j]` / `deepGpu[j]` blocks if `deepSlot[j] === s`;
 * - otherwise 1 block in any tier, and 1 in host and in GPU by the word's tier bits
 *   (`word & 3` ≠ 0: GPU or host; `word & 1`: GPU), 0 where the bit is absent.
 * Slots that are not in `first` match nothing. Both lists are sorted by slot. Slots name
 * workers through `RadixTreeIndex.slotKey` until the next event (a cleared worker's slot
 * is reused once its memory is reclaimed). The answer is a copy: events applied after
 * the lookup do not change it.
 */

export class MatchBuffer {
  /** Keys looked up. */
  blocks = 0;
  /** Holders of the first block: `first[0, count)`, holder words `slot << 4 | flags`. */
  count = 0;
  first = new Uint32Array(64);
  /** Workers matching two or more blocks: `[0, deepCount)` of the four columns. */
  deepCount = 0;
  deepSlot = new Int32Array(16);
  deepGpu = new Int32Array(16);
  deepHost = new Int32Array(16);
  deepDisk = new Int32Array(16);

  /** Room for `n` first-block holders (contents are not kept). */
  reserveFirst(n: number): Uint32Array {
    if (this.first.length < n) this.first = new Uint32Array(Math.max(n, this.first.length * 2));
    return this.first;
  }

  /** Room for `n` deep entries, keeping the first `deepCount`. */
  reserveDeep(n: number): void {
    if (this.deepSlot.length >= n) return;
    const size = Math.max(n, this.deepSlot.length * 2);
    const grow = (a: Int32Array<ArrayBuffer>): Int32Array<ArrayBuffer> => {
      const b = new Int32Array(size);
      b.set(a.subarray(0, this.deepCount));
      return b;
    };
    this.deepSlot = grow(this.deepSlot);
    this.deepGpu = grow(this.deepGpu);
    this.deepHost = grow(this.deepHost);
    this.deepDisk = grow(this.deepDisk);
  }
}
