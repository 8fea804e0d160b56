/**
 * A least-recently-used map from segment text to its token ids, bounded by an estimate of
 * the bytes it holds (UTF-16 key + 4 bytes per id + a fixed overhead per entry).
 */

const ENTRY_OVERHEAD_BYTES = 96;

export interface SegmentCacheStats {
  readonly entries: number;
  readonly bytes: number;
  readonly hits: number;
  readonly misses: number;
}

export class SegmentCache {
  readonly #maxBytes: number;
  readonly #map = new Map<string, Int32Array>();
  #bytes = 0;
  #hits = 0;
  #misses = 0;

  constructor(maxBytes: number) {
    this.#maxBytes = maxBytes;
  }

  static sizeOf(text: string, ids: number): number {
    return text.length * 2 + ids * 4 + ENTRY_OVERHEAD_BYTES;
  }

  get(text: string): Int32Array | undefined {
    const v = this.#map.get(text);
    if (v === undefined) {
      this.#misses++;
      return undefined;
    }
    this.#hits++;
    this.#map.delete(text);
    this.#map.set(text, v);
    return v;
  }

  set(text: string, ids: ArrayLike<number>): void {
    const size = SegmentCache.sizeOf(text, ids.length);
    if (size > this.#maxBytes / 4) return; // one huge segment must not flush the cache
    const old = this.#map.get(text);
    if (old !== undefined) {
      this.#map.delete(text);
      this.#bytes -= SegmentCache.sizeOf(text, old.length);
    }
    this.#map.set(text, Int32Array.from(ids));
    this.#bytes += size;
    while (this.#bytes > this.#maxBytes) {
      const [k, v] = this.#map.entries().next().value as [string, Int32Array];
      this.#map.delete(k);
      this.#bytes -= SegmentCache.sizeOf(k, v.length);
    }
  }

  stats(): SegmentCacheStats {
    return { entries: this.#map.size, bytes: this.#bytes, hits: this.#hits, misses: this.#misses };
  }
}
