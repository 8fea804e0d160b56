/**
 * A paged prefix KV cache with vLLM v1's rules (`BlockPool`, `KVCacheManager`), for the
 * simulated worker and for trace replay in virtual time. Pure and synchronous: no I/O, no
 * timers; cache events go to an optional sink callback.
 *
 * Rules followed (see docs/simulator.md):
 * - block 0 is a reserved null block: `numBlocks − 1` blocks hold tokens;
 * - a sequence's full blocks are hashed by chaining (parent, tokens, LoRA name);
 * - on admission the longest cached prefix is reused, capped so that at least the last
 *   prompt token is computed; hit blocks are touched (ref count up, out of the free queue);
 * - new blocks come from the free queue head; a block that still carries a hash is then
 *   evicted from the cached map → one `removed` event per block;
 * - blocks become cached as soon as they are full of tokens scheduled for computation →
 *   one `stored` event per call with the newly cached blocks of that sequence;
 * - identical blocks are not de-duplicated (as in vLLM: block tables are append-only), so
 *   one hash may be cached by several blocks and announced several times;
 * - freeing releases the blocks tail first, so a prefix outlives its suffixes; they stay
 *   cached until reused;
 * - a prefix-cache reset needs every block free, then clears all hashes → `cleared`.
 */

import { BlockHasher, hex16, type SimBlockHash } from "./block-hasher.js";
import { CachedBlocks } from "./cached-blocks.js";
import { FreeBlockQueue } from "./free-block-queue.js";

/**
 * Cache events as the engine emits them. Hashes are the 16-hex-digit form of the
 * unsigned 64-bit value (`hashToBigInt` gives the wire's integer; the router's
 * normalised `EngineBlockHash` of that integer is the same string).
 */
export type CacheEvent =
  | {
      readonly type: "stored";
      readonly blockHashes: SimBlockHash[];
      /** Hash of the block before the first one; null = the sequence's first block. */
      readonly parentHash: SimBlockHash | null;
      readonly tokenIds: number[];
      readonly blockSize: number;
      readonly loraName: string | null;
    }
  | { readonly type: "removed"; readonly blockHashes: SimBlockHash[] }
  | { readonly type: "cleared" };

export type CacheEventSink = (event: CacheEvent) => void;

export interface KvCacheOptions {
  /** Total blocks including the reserved null block (vLLM's `num_gpu_blocks`). */
  readonly numBlocks: number;
  /** Tokens per block. */
  readonly blockSize: number;
  /** Hash seed (vLLM draws one per process). */
  readonly seed: number;
}

/** One request's view of the cache. Create with `PagedKvCache.sequence`. */
export class KvSequence {
  /** All tokens so far: prompt, then generated tokens appended by the caller. */
  readonly tokens: number[];
  readonly loraName: string | null;
  /** Halves of the hashes of the full blocks of `tokens`, computed lazily, in order. */
  readonly hashHi: number[] = [];
  readonly hashLo: number[] = [];
  /** Block ids held, in sequence order (empty when not admitted). */
  blocks: number[] = [];
  /** How many leading entries of `blocks` are registered in the cache. */
  numCachedBlocks = 0;

  /** @param copy false = use `tokens` itself (the caller hands it over) */
  constructor(tokens: ArrayLike<number>, loraName: string | null, copy = true) {
    this.tokens = copy || !Array.isArray(tokens) ? Array.from(tokens) : (tokens as number[]);
    this.loraName = loraName;
  }

  /** Full blocks hashed so far. */
  get numHashed(): number {
    return this.hashHi.length;
  }

  /** Block `i`'s hash as the engine announces it. */
  hash(i: number): SimBlockHash {
    return hex16(this.hashHi[i]!, this.hashLo[i]!);
  }
}

/** What an admission found and took. */
export interface AdmitResult {
  /** Prompt tokens served from the cache (a multiple of the block size). */
  readonly hitTokens: number;
  /** Blocks newly taken from the free queue. */
  readonly newBlocks: number;
}

export interface KvCacheStats {
  /** Tokens of admitted sequences looked up in the prefix cache. */
  readonly queries: number;
  /** Of those, tokens found. */
  readonly hits: number;
  readonly admitted: number;
  readonly evictions: number;
}

export class PagedKvCache {
  readonly numBlocks: number;
  readonly blockSize: number;
  readonly #hasher: BlockHasher;
  readonly #sink: CacheEventSink | null;
  readonly #free: FreeBlockQueue;
  /** Per block id, grown as blocks are first used (see `FreeBlockQueue`). */
  #refCount: Int32Array;
  /** hash → blocks holding it (the first is the one hits use). */
  readonly #cached = new CachedBlocks();
  #queries = 0;
  #hits = 0;
  #admitted = 0;
  #evictions = 0;

  constructor(options: KvCacheOptions, sink?: CacheEventSink) {
    const { numBlocks, blockSize } = options;
    if (!Number.isInteger(numBlocks) || numBlocks < 2) {
      throw new RangeError(`numBlocks must be an integer ≥ 2, got ${numBlocks}`);
    }
    if (!Number.isInteger(blockSize) || blockSize < 1) {
      throw new RangeError(`blockSize must be a positive integer, got ${blockSize}`);
    }
    this.numBlocks = numBlocks;
    this.blockSize = blockSize;
    this.#hasher = new BlockHasher(options.seed);
    this.#sink = sink ?? null;
    this.#free = new FreeBlockQueue(numBlocks, 1);
    this.#refCount = new Int32Array(Math.min(numBlocks, 1024));
  }

  /** Blocks that can hold tokens (all but the null block). */
  get usableBlocks(): number {
    return this.numBlocks - 1;
  }

  /** Free blocks, cached or not (eviction candidates included). */
  get numFreeBlocks(): number {
    return this.#free.size;
  }

  /** Blocks currently registered under a hash (in use or free). */
  get numCachedBlocks(): number {
    return this.#cached.blocks;
  }

  /** Fraction of usable blocks held by sequences, 0–1 (vLLM's `kv_cache_usage_perc`). */
  usage(): number {
    return 1 - this.#free.size / this.usableBlocks;
  }

  stats(): KvCacheStats {
    return {
      queries: this.#queries,
      hits: this.#hits,
      admitted: this.#admitted,
      evictions: this.#evictions,
    };
  }

  /** Blocks a sequence of `numTokens` tokens occupies. */
  blocksFor(numTokens: number): number {
    return Math.ceil(numTokens / this.blockSize);
  }

  /** A new, unadmitted sequence over a copy of `tokens`. */
  sequence(tokens: ArrayLike<number>, loraName: string | null = null): KvSequence {
    return new KvSequence(tokens, loraName);
  }

  /**
   * A new, unadmitted sequence over `tokens` itself, not a copy (trace replay, where
   * prompts are built per request and never appended to). The caller must not change it.
   */
  sequenceOver(tokens: number[], loraName: string | null = null): KvSequence {
    return new KvSequence(tokens, loraName, false);
  }

  /** Leading blocks of `seq` found in the cache, capped to leave the last token to compute. */
  cachedPrefixBlocks(seq: KvSequence): number {
    const max = Math.floor(Math.max(0, seq.tokens.length - 1) / this.blockSize);
    this.#hashUpTo(seq, max);
    let n = 0;
    while (n < max && this.#cached.find(seq.hashHi[n]!, seq.hashLo[n]!) >= 0) n++;
    return n;
  }

  /**
   * Admit a sequence holding no blocks: reuse its cached prefix and allocate blocks for all
   * its other tokens. Returns null, changing nothing, when free blocks are short.
   */
  admit(seq: KvSequence): AdmitResult | null {
    if (seq.blocks.length !== 0) throw new Error("sequence is already admitted");
    const hitBlocks = this.cachedPrefixBlocks(seq);
    const hitIds: number[] = [];
    let evictable = 0;
    for (let i = 0; i < hitBlocks; i++) {
      const id = this.#cached.find(seq.hashHi[i]!, seq.hashLo[i]!);
      hitIds.push(id);
      if (this.#refCount[id] === 0) evictable++;
    }
    const newBlocks = this.blocksFor(seq.tokens.length) - hitBlocks;
    if (newBlocks + evictable > this.#free.size) return null;
    for (const id of hitIds) {
      if (this.#refCount[id] === 0) this.#free.remove(id);
      this.#refCount[id]!++;
    }
    seq.blocks = hitIds;
    seq.numCachedBlocks = hitBlocks;
    this.#allocate(seq, newBlocks);
    this.#queries += seq.tokens.length;
    this.#hits += hitBlocks * this.blockSize;
    this.#admitted++;
    this.#cacheFullBlocks(seq);
    return { hitTokens: hitBlocks * this.blockSize, newBlocks };
  }

  /**
   * Make room for tokens appended to an admitted sequence (decode) and cache the blocks
   * they fill. Returns false, changing nothing, when free blocks are short.
   */
  grow(seq: KvSequence): boolean {
    const need = this.blocksFor(seq.tokens.length) - seq.blocks.length;
    if (need > this.#free.size) return false;
    if (need > 0) this.#allocate(seq, need);
    this.#cacheFullBlocks(seq);
    return true;
  }

  /** Release a sequence's blocks, tail first; they stay cached until reused. */
  free(seq: KvSequence): void {
    const blocks = seq.blocks;
    for (let i = blocks.length - 1; i >= 0; i--) {
      const id = blocks[i]!;
      if (--this.#refCount[id]! === 0) this.#free.push(id);
    }
    seq.blocks = [];
    seq.numCachedBlocks = 0;
  }

  /** Drop every cached hash. Only possible when no block is in use (as in vLLM). */
  resetPrefixCache(): boolean {
    if (this.#free.size !== this.usableBlocks) return false;
    this.#cached.clear();
    this.#sink?.({ type: "cleared" });
    return true;
  }

  /** hash → number of blocks caching it (tests and invariants). */
  cachedHashCounts(): Map<SimBlockHash, number> {
    const out = new Map<SimBlockHash, number>();
    const c = this.#cached;
    for (const b of c.heads()) out.set(hex16(c.hiOf(b), c.loOf(b)), c.chainLength(b));
    return out;
  }

  /** Free block ids in eviction order (tests). */
  freeQueueOrder(): number[] {
    return this.#free.toArray();
  }

  #hashUpTo(seq: KvSequence, numBlocks: number): void {
    const bs = this.blockSize;
    const h = this.#hasher;
    const his = seq.hashHi;
    const los = seq.hashLo;
    for (let i = his.length; i < numBlocks; i++) {
      if (i === 0) h.hashInto(false, 0, 0, seq.tokens, 0, bs, seq.loraName);
      else h.hashInto(true, his[i - 1]!, los[i - 1]!, seq.tokens, i * bs, bs, seq.loraName);
      his.push(h.hi);
      los.push(h.lo);
    }
  }

  #allocate(seq: KvSequence, count: number): void {
    for (let i = 0; i < count; i++) {
      const id = this.#free.shift();
      if (id >= this.#refCount.length) this.#growRefCounts(id + 1);
      if (this.#cached.holds(id)) this.#evict(id);
      this.#refCount[id] = 1;
      seq.blocks.push(id);
    }
  }

  #growRefCounts(min: number): void {
    const n = Math.min(this.numBlocks, Math.max(min, this.#refCount.length * 2));
    const grown = new Int32Array(n);
    grown.set(this.#refCount);
    this.#refCount = grown;
  }

  #evict(id: number): void {
    const c = this.#cached;
    const hi = c.hiOf(id);
    const lo = c.loOf(id);
    c.remove(id);
    this.#evictions++;
    this.#sink?.({ type: "removed", blockHashes: [hex16(hi, lo)] });
  }

  #cacheFullBlocks(seq: KvSequence): void {
    const full = Math.floor(seq.tokens.length / this.blockSize);
    const from = seq.numCachedBlocks;
    if (full <= from) return;
    this.#hashUpTo(seq, full);
    for (let i = from; i < full; i++) {
      this.#cached.add(seq.blocks[i]!, seq.hashHi[i]!, seq.hashLo[i]!);
    }
    seq.numCachedBlocks = full;
    if (this.#sink === null) return;
    const bs = this.blockSize;
    this.#sink({
      type: "stored",
      blockHashes: Array.from({ length: full - from }, (_, k) => seq.hash(from + k)),
      parentHash: from === 0 ? null : seq.hash(from - 1),
      tokenIds: seq.tokens.slice(from * bs, full * bs),
      blockSize: bs,
      loraName: seq.loraName,
    });
  }
}
