/**
 * Fixed-size records of 32-bit words in one growable Uint32Array, with a free list: the
 * storage under the index's two tables (`node-store.ts`, `engine-hash-table.ts`). A freed
 * record links the free list through one of its own words (`linkField`), so freeing
 * and reusing cost nothing beyond that word.
 *
 * `rec` is replaced when the pool grows: read it after `alloc`, never keep it across one.
 */

export class RecordPool {
  /** Record `id` occupies words `[id * stride, (id + 1) * stride)`. */
  rec: Uint32Array;
  readonly stride: number;
  /** Live records. */
  live = 0;
  readonly #link: number;
  #capacity: number;
  #top = 0;
  #freeHead = -1;

  constructor(stride: number, linkField: number, initialCapacity: number) {
    this.stride = stride;
    this.#link = linkField;
    this.#capacity = Math.max(16, initialCapacity);
    this.rec = new Uint32Array(this.#capacity * stride);
  }

  /** Records ever allocated (live or freed): `[0, top)` covers every record. */
  get top(): number {
    return this.#top;
  }

  /** Id of a record to fill (its words hold garbage); counts it live. */
  alloc(): number {
    let id = this.#freeHead;
    if (id >= 0) {
      this.#freeHead = this.rec[id * this.stride + this.#link]! - 1;
    } else {
      if (this.#top === this.#capacity) {
        const grown = new Uint32Array(this.rec.length * 2);
        grown.set(this.rec);
        this.rec = grown;
        this.#capacity *= 2;
      }
      id = this.#top++;
    }
    this.live++;
    return id;
  }

  /** Returns record `id` to the free list (its link word is overwritten). */
  free(id: number): void {
    this.rec[id * this.stride + this.#link] = this.#freeHead + 1;
    this.#freeHead = id;
    this.live--;
  }

  get byteLength(): number {
    return this.rec.byteLength;
  }
}
