/**
 * Fixed-size records of 32-bit words in one growable Uint32Array, with a free list: the
 * storage under the index's two tables (`node-store.ts`, `engine-hash-table.ts`). A freed
 * record links the free list through one of its own words (`linkField`), so freeing
 * and reusing cost nothing beyond that word.
 *
 * Growing does not copy (a doubling copy of a 100 MB pool held the event loop for
 * 0.1–0.8 s at 4M records): the words live in a growable buffer (see `GrowableWords`),
 * which reserves address space and commits pages as it grows in place. Growing replaces
 * `rec` by a longer view of the same memory: read `rec` after `alloc`, never keep it
 * across one (an older view stays valid but short).
 */

/** Address space reserved per pool (committed only as used): 4 GiB − 1 page. */
const MAX_BYTES = 2 ** 32 - 4096;

interface ResizableBuffer extends ArrayBuffer {
  resize(byteLength: number): void;
  readonly resizable: boolean;
  readonly maxByteLength: number;
}

/** A growable SharedArrayBuffer (ES2024; the project's TypeScript libs lack its types). */
interface GrowableBuffer extends SharedArrayBuffer {
  grow(byteLength: number): void;
  readonly maxByteLength: number;
}
const Growable = SharedArrayBuffer as unknown as new (
  n: number,
  o: { maxByteLength: number },
) => GrowableBuffer;

/**
 * Words that grow in place without a copy: a growable SharedArrayBuffer (address space
 * reserved, pages committed as it grows) seen through a fixed-length view, made again
 * after each growth (the old view stays valid: such a buffer never shrinks or detaches).
 *
 * Why not a resizable ArrayBuffer and a length-tracking view (what this was until
 * 2026-11-23): V8 (Node 20) compiles accesses to views whose length may change into a
 * slower path, several times slower than a plain array's (a random read-modify-write
 * loop 2–4×, stores most), and every record access of the index paid it. A fixed-length
 * view of a growable shared buffer cannot go out of bounds, and V8 treats it as a plain
 * typed array (same loop: same time as a plain array). A `WebAssembly.Memory` would also
 * grow in place with plain views, but each growth detaches its old buffer, and the first
 * detached buffer of a process makes every typed-array access in it check for detachment
 * (measured: ~40 % slower loops). Nothing is shared with another thread: the buffer is
 * shared only in type. Its bytes are not counted in `process.memoryUsage().arrayBuffers`.
 */
export class GrowableWords {
  /** The words (a new, longer view after each `grow`). */
  words: Uint32Array;
  readonly #buffer: GrowableBuffer;
  readonly #maxBytes: number;

  /** `maxBytes` (whole words, ≤ `MAX_BYTES`): the reservation; tests use small ones. */
  constructor(initialBytes: number, maxBytes = MAX_BYTES) {
    this.#maxBytes = Math.floor(Math.min(maxBytes, MAX_BYTES) / 4) * 4;
    this.#buffer = new Growable(Math.ceil(initialBytes / 4) * 4, {
      maxByteLength: this.#maxBytes,
    });
    this.words = new Uint32Array(this.#buffer, 0, this.#buffer.byteLength / 4);
  }

  get byteLength(): number {
    return this.#buffer.byteLength;
  }

  /**
   * Grows to at least `minBytes` and, as far as the reservation allows, to `preferredBytes`
   * (whole words); false, unchanged, only when `minBytes` itself is past the reservation.
   */
  grow(minBytes: number, preferredBytes = minBytes): boolean {
    const need = Math.ceil(minBytes / 4) * 4;
    if (need <= this.#buffer.byteLength) return true;
    const max = this.#maxBytes;
    if (need > max) return false;
    const want = Math.max(need, Math.min(max, Math.ceil(preferredBytes / 4) * 4));
    this.#buffer.grow(want);
    this.words = new Uint32Array(this.#buffer, 0, want / 4);
    return true;
  }
}

export class RecordPool {
  /** Record `id` occupies words `[id * stride, (id + 1) * stride)`. */
  rec: Uint32Array;
  readonly stride: number;
  /** Live records. */
  live = 0;
  readonly #link: number;
  readonly #words: GrowableWords;
  #capacity: number;
  #top = 0;
  #freeHead = -1;

  constructor(stride: number, linkField: number, initialCapacity: number) {
    this.stride = stride;
    this.#link = linkField;
    this.#words = new GrowableWords(Math.max(16, initialCapacity) * stride * 4);
    this.rec = this.#words.words;
    this.#capacity = Math.floor(this.rec.length / stride);
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
        const words = this.#words;
        if (!words.grow((this.#capacity + 1) * this.stride * 4, words.byteLength * 2)) {
          throw new RangeError(`record pool full (${this.#capacity} records)`);
        }
        const capacity = Math.floor(words.words.length / this.stride);
        this.rec = words.words;
        this.#capacity = capacity;
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
    return this.#words.byteLength;
  }

  /** Bytes of the records ever allocated: what has been written, so resident (the rest of
   * `byteLength` is committed but untouched). */
  get usedBytes(): number {
    return this.#top * this.stride * 4;
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
