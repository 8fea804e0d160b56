/**
 * Fixed-size records of 32-bit words in one growable Uint32Array, with a free list: the
 * storage under the index's two tables (`node-store.ts`, `engine-hash-table.ts`). A freed
 * record links the free list through one of its own words (`linkField`), so freeing
 * and reusing cost nothing beyond that word.
 *
 * Growing does not copy: `rec` views a resizable ArrayBuffer that reserves address space
 * for `MAX_BYTES` and commits pages as it grows (a doubling copy of a 100 MB pool held the
 * event loop for 0.1–0.8 s at 4M records). Still, read `rec` after `alloc`, never keep it
 * across one.
 */

/** Address space reserved per pool (committed only as used): 4 GiB − 1 page. */
const MAX_BYTES = 2 ** 32 - 4096;

interface ResizableBuffer extends ArrayBuffer {
  resize(byteLength: number): void;
  readonly resizable: boolean;
  readonly maxByteLength: number;
}

export class RecordPool {
  /** Record `id` occupies words `[id * stride, (id + 1) * stride)`. */
  rec: Uint32Array;
  readonly stride: number;
  /** Live records. */
  live = 0;
  readonly #link: number;
  readonly #buffer: ResizableBuffer;
  #capacity: number;
  #top = 0;
  #freeHead = -1;

  constructor(stride: number, linkField: number, initialCapacity: number) {
    this.stride = stride;
    this.#link = linkField;
    this.#capacity = Math.max(16, initialCapacity);
    const Resizable = ArrayBuffer as unknown as new (
      n: number,
      o: { maxByteLength: number },
    ) => ResizableBuffer;
    const max = Math.floor(MAX_BYTES / (4 * stride)) * 4 * stride;
    this.#buffer = new Resizable(this.#capacity * stride * 4, { maxByteLength: max });
    this.rec = new Uint32Array(this.#buffer);
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
        const bytes = Math.min(this.#buffer.maxByteLength, this.#capacity * 2 * this.stride * 4);
        if (bytes <= this.#capacity * this.stride * 4) {
          throw new RangeError(`record pool full (${this.#capacity} records)`);
        }
        this.#buffer.resize(bytes); // the length-tracking view grows with it
        this.#capacity = bytes / (this.stride * 4);
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

/**
 * The first `n` words of `rec`, copied into `into` (a buffer kept between snapshots, grown
 * in place when too small: see `bufferFor`). Returns a view of exactly `n` words.
 */
export function copyInto(rec: Uint32Array, n: number, into?: Uint32Array): Uint32Array {
  const out = bufferFor(n, into);
  out.set(rec.subarray(0, n));
  return out.subarray(0, n);
}

/**
 * The whole buffer under `into`, grown in place to a quarter more than `n` words when it
 * holds fewer, or a new one. Copy buffers are resizable (address space reserved, pages
 * committed as they are touched), so a snapshot never allocates and zeroes tens of MB in
 * one go, and an index that outgrows its copy buffer never needs a second one: the first
 * write of a process paused the loop 47–91 ms, mostly page faults of the fresh 60 MB
 * copy touched in 4 MB steps and the GC that its allocation set off.
 */
export function bufferFor(n: number, into?: Uint32Array): Uint32Array {
  const want = Math.ceil(n * 1.25) * 4;
  let buf = into?.buffer as ResizableBuffer | undefined;
  if (buf === undefined || !buf.resizable) {
    const Resizable = ArrayBuffer as unknown as new (
      n: number,
      o: { maxByteLength: number },
    ) => ResizableBuffer;
    buf = new Resizable(0, { maxByteLength: MAX_BYTES - (MAX_BYTES % 4) });
  }
  if (buf.byteLength < n * 4) buf.resize(Math.min(want, buf.maxByteLength));
  return new Uint32Array(buf, 0, buf.byteLength / 4);
}
