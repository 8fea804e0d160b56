/**
 * A toy paged prefix cache, the part of an inference engine that decides which KV
 * blocks it holds: prompts are cut into full blocks, each block's hash chains its
 * parent's (as vLLM's do), hits are touched, misses are stored, and when the cache is
 * full the least recently used blocks are evicted. Every change is reported to a sink —
 * exactly what a real engine must tell the router.
 */

/** What the cache reports, in order. */
export interface CacheEvents {
  /** A run of consecutive new blocks; `parent` is the block before the run (null = root). */
  stored(hashes: bigint[], parent: bigint | null, tokenIds: number[]): void;
  removed(hashes: bigint[]): void;
}

const FNV_OFFSET = 0xcbf29ce484222325n;
const FNV_PRIME = 0x100000001b3n;
const MASK = (1n << 64n) - 1n;

/** FNV-1a over the parent hash and the block's tokens: 64 bits, chained. */
export function blockHash(parent: bigint | null, tokens: readonly number[]): bigint {
  let h = FNV_OFFSET;
  const mix = (v: bigint) => {
    for (let i = 0n; i < 64n; i += 8n) h = ((h ^ ((v >> i) & 0xffn)) * FNV_PRIME) & MASK;
  };
  mix(parent ?? 0n);
  for (const t of tokens) mix(BigInt(t));
  return h;
}

export class ToyPrefixCache {
  /** hash → true, in least-recently-used-first order (a Map keeps insertion order). */
  readonly #blocks = new Map<bigint, true>();

  constructor(
    readonly blockSize: number,
    readonly capacity: number,
    readonly events: CacheEvents,
  ) {}

  get size(): number {
    return this.#blocks.size;
  }

  /** Leading blocks of `tokens` held now (what a router should report as cached). */
  cachedPrefixBlocks(tokens: readonly number[]): number {
    let parent: bigint | null = null;
    let n = 0;
    for (let i = 0; i + this.blockSize <= tokens.length; i += this.blockSize) {
      const h = blockHash(parent, tokens.slice(i, i + this.blockSize));
      if (!this.#blocks.has(h)) break;
      parent = h;
      n++;
    }
    return n;
  }

  /** Prefill one prompt: hits are touched, missing blocks stored (evicting if full). */
  prefill(tokens: readonly number[]): { hits: number; stored: number } {
    const bs = this.blockSize;
    const hashes: bigint[] = [];
    for (let i = 0; i + bs <= tokens.length; i += bs) {
      hashes.push(blockHash(hashes.at(-1) ?? null, tokens.slice(i, i + bs)));
    }
    if (hashes.length > this.capacity) throw new RangeError("prompt larger than the cache");
    const missing = hashes.filter((h) => !this.#blocks.has(h)).length;
    for (const h of hashes) if (this.#blocks.delete(h)) this.#blocks.set(h, true); // touch
    this.#evict(this.#blocks.size + missing - this.capacity);
    // Runs of consecutive missing blocks, one stored event each.
    let hits = 0;
    for (let i = 0; i < hashes.length; ) {
      if (this.#blocks.has(hashes[i]!)) {
        hits++;
        i++;
        continue;
      }
      const start = i;
      while (i < hashes.length && !this.#blocks.has(hashes[i]!))
        this.#blocks.set(hashes[i++]!, true);
      this.events.stored(
        hashes.slice(start, i),
        start === 0 ? null : hashes[start - 1]!,
        tokens.slice(start * bs, i * bs),
      );
    }
    return { hits, stored: hashes.length - hits };
  }

  #evict(count: number): void {
    if (count <= 0) return;
    const victims: bigint[] = [];
    for (const h of this.#blocks.keys()) {
      if (victims.length === count) break;
      victims.push(h);
    }
    for (const h of victims) this.#blocks.delete(h);
    this.events.removed(victims);
  }
}
