/**
 * A lookup's answer without an object per worker (`RadixTreeIndex.matchInto`): the holder
 * words of the prompt's first block, plus the few workers whose run goes deeper. Every worker holding the first block matches at least that block; only
 * the "deep" ones (the holders of the second block among them, and so on) get a list
 * entry, so a lookup costs the path's length, one copy of the first block's holder list
 * and the holders of the deeper blocks: not holders × depth, and no allocation once the
 * buffer has grown. A system prompt held by the whole fleet costs nothing per holder: the
 * answer reads that block's holder list in place (`first` is then the index's own
 * array, from `firstAt`), which is why the answer holds only until the index changes.
 *
 * Reading it: worker slot `s` (= `first[firstAt + k] >>> 4`, k < `count`) matches
 * - `deepDisk[j]` / `deepHost[j]` / `deepGpu[j]` blocks if `deepSlot[j] === s`;
 * - otherwise 1 block in any tier, and 1 in host and in GPU by the word's tier bits
 *   (`word & 3` ≠ 0: GPU or host; `word & 1`: GPU), 0 where the bit is absent.
 * Slots that are not in `first` match nothing. Both lists are sorted by slot. Slots name
 * workers through `RadixTreeIndex.slotKey` until the next event (a cleared worker's slot
 * is reused once its memory is reclaimed). Read the answer before the index changes
 * again (an event, `removeWorker`, `reclaim`): it may be the index's own holder list.
 */

export class MatchBuffer {
  /** Keys looked up. */
  blocks = 0;
  /**
   * Holders of the first block: `first[firstAt, firstAt + count)`, holder words
   * `slot << 4 | flags`; `first` is this buffer's own array or the index's (read only).
   */
  count = 0;
  #own = new Uint32Array(64);
  first: Uint32Array = this.#own;
  firstAt = 0;
  /** Workers matching two or more blocks: `[0, deepCount)` of the four columns. */
  deepCount = 0;
  deepSlot = new Int32Array(16);
  deepGpu = new Int32Array(16);
  deepHost = new Int32Array(16);
  deepDisk = new Int32Array(16);

  /** Room for `n` first-block holders in the buffer's own array (contents are not kept). */
  reserveFirst(n: number): Uint32Array {
    if (this.#own.length < n) this.#own = new Uint32Array(Math.max(n, this.#own.length * 2));
    this.first = this.#own;
    this.firstAt = 0;
    return this.#own;
  }

  /** The first block's holders are `words[at, at + count)`: the index's array, in place. */
  viewFirst(words: Uint32Array, at: number, count: number): void {
    this.first = words;
    this.firstAt = at;
    this.count = count;
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
