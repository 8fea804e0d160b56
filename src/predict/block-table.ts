/**
 * Entries keyed exactly by a block key's two 32-bit words, for `PredictedBlocks`: a Map
 * on a 30-bit hash of both words — a small integer, which V8 hashes and stores unboxed
 * (about twice as fast per lookup as the 53-bit number keys used before) — whose entries
 * hold both words to confirm a hit. A key whose hash another key already holds goes to a
 * second Map on the exact pair (rare: at 100k entries, about one new key in 10^4), which
 * lookups consult only when it is not empty. No key ever stands for another.
 */

export interface TableEntry {
  readonly hi: number;
  readonly lo: number;
  /** In the second Map (its hash was taken when it was added). */
  spilled: boolean;
}

const hashOf = (hi: number, lo: number) => (Math.imul(hi, 0x9e3779b1) ^ lo) >>> 2;
const pairOf = (hi: number, lo: number) => `${hi >>> 0}:${lo >>> 0}`;

export class BlockTable<E extends TableEntry> {
  readonly #byHash = new Map<number, E>();
  readonly #spilled = new Map<string, E>();

  get size(): number {
    return this.#byHash.size + this.#spilled.size;
  }

  get(hi: number, lo: number): E | undefined {
    const e = this.#byHash.get(hashOf(hi, lo));
    if (e !== undefined && e.hi === hi && e.lo === lo) return e;
    return this.#spilled.size === 0 ? undefined : this.#spilled.get(pairOf(hi, lo));
  }

  /** Add an entry whose key is not in the table (`get` answered undefined). */
  add(e: E): void {
    const h = hashOf(e.hi, e.lo);
    if (this.#byHash.has(h)) {
      e.spilled = true;
      this.#spilled.set(pairOf(e.hi, e.lo), e);
    } else {
      e.spilled = false;
      this.#byHash.set(h, e);
    }
  }

  delete(e: E): void {
    if (e.spilled) this.#spilled.delete(pairOf(e.hi, e.lo));
    else this.#byHash.delete(hashOf(e.hi, e.lo));
  }

  clear(): void {
    this.#byHash.clear();
    this.#spilled.clear();
  }
}
