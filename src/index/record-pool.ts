/**
 * Fixed-size records of 32-bit words in one growable Uint32Array, with a free list: the
 * storage under the index's two tables (`node-store.ts`, `engine-hash-table.ts`). A freed
 * record links the free list through one of its own words (`linkField`), so freeing
 * and reusing cost nothing beyond that word.
 *
 * Growing does not copy (a doubling copy of a 100 MB pool held the event loop for
 * 0.1–0.8 s at 4M records): the words live in a `WebAssembly.Memory` (see `GrowableWords`),
 * which reserves address space and commits pages as it grows in place. Growing replaces
 * `rec` (a new view of the same memory; the old view is emptied): read `rec` after
 * `alloc`, never keep it across one.
 */

/** Address space reserved per pool (committed only as used): 4 GiB − 1 page. */
const MAX_BYTES = 2 ** 32 - 4096;
/** WebAssembly memory pages: 64 KiB each, at most 65,536 (4 GiB). */
const PAGE = 65536;
const MAX_PAGES = 65536;

/** The part of `WebAssembly.Memory` used here (the project's TypeScript libs lack its types). */
interface WasmMemory {
  readonly buffer: ArrayBuffer;
  grow(pages: number): number;
}
const WasmMemory = (
  globalThis as unknown as {
    WebAssembly: { Memory: new (d: { initial: number; maximum: number }) => WasmMemory };
  }
).WebAssembly.Memory;

interface ResizableBuffer extends ArrayBuffer {
  resize(byteLength: number): void;
  readonly resizable: boolean;
  readonly maxByteLength: number;
}

/**
 * Words that grow in place without a copy. Why a `WebAssembly.Memory` and not a resizable
 * ArrayBuffer (what this was until 2026-11-23): a view of a resizable buffer is a
 * different kind of typed array to V8 (its length may change under it), and its element
 * accesses are several times slower than a plain array's (Node 20: a random
 * read-modify-write loop 2–3× slower, stores most); every record access of the index
 * paid it. A memory's buffer is a plain ArrayBuffer, so its views are plain typed arrays;
 * `grow` commits more pages in place and detaches the old buffer, so the view is made
 * again after each growth. (Such memory is not counted in
 * `process.memoryUsage().arrayBuffers`: `byteLength` reports it.)
 */
export class GrowableWords {
  /** The words (a new view after each `grow`). */
  words: Uint32Array;
  readonly #memory: WasmMemory;

  constructor(initialBytes: number) {
    const pages = Math.max(1, Math.ceil(initialBytes / PAGE));
    this.#memory = new WasmMemory({ initial: pages, maximum: MAX_PAGES });
    this.words = new Uint32Array(this.#memory.buffer);
  }

  get byteLength(): number {
    return this.#memory.buffer.byteLength;
  }

  /** Grows to at least `bytes` (rounded up to pages); false when that is past 4 GiB. */
  grow(bytes: number): boolean {
    const have = this.#memory.buffer.byteLength / PAGE;
    const want = Math.ceil(bytes / PAGE);
    if (want <= have) return true;
    if (want > MAX_PAGES) return false;
    this.#memory.grow(want - have);
    this.words = new Uint32Array(this.#memory.buffer);
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
        if (!words.grow(Math.min(MAX_BYTES, words.byteLength * 2))) {
          throw new RangeError(`record pool full (${this.#capacity} records)`);
        }
        const capacity = Math.floor(words.words.length / this.stride);
        if (capacity <= this.#capacity) {
          throw new RangeError(`record pool full (${this.#capacity} records)`);
        }
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
