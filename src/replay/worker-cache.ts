/**
 * Binds the simulator's `PagedKvCache` (vLLM v1 rules) to the fleet's `WorkerCache`
 * interface: one `KvSequence` per admitted request, keyed by trace index.
 *
 * The cache registers a prompt's full blocks at admission (vLLM caches blocks as soon as
 * they are scheduled for computation); the fleet admits a worker's next prompt only when
 * the previous prefill is done, so a later request never hits blocks still being computed.
 * Generated tokens are not appended: the trace's next turns cannot share them (their
 * tokens are derived from hash_ids), and they would occupy ~3 % of the prompt blocks.
 */

import { type CacheEventSink, type KvSequence, PagedKvCache } from "../sim/kv-cache.js";
import type { WorkerCache } from "./sim-fleet.js";

export class SimWorkerCache implements WorkerCache {
  readonly #cache: PagedKvCache;
  readonly #live = new Map<number, KvSequence>();

  /**
   * @param capacityBlocks usable KV blocks (the null block is added on top)
   * @param sink receives the cache's engine events; omit when nobody listens (faster)
   */
  constructor(capacityBlocks: number, blockSize: number, seed: number, sink?: CacheEventSink) {
    this.#cache = new PagedKvCache({ numBlocks: capacityBlocks + 1, blockSize, seed }, sink);
  }

  get capacityBlocks(): number {
    return this.#cache.usableBlocks;
  }

  get evictions(): number {
    return this.#cache.stats().evictions;
  }

  usage(): number {
    return this.#cache.usage();
  }

  admit(id: number, tokens: readonly number[]): number | null {
    // The replay builds each prompt once and never changes it: no copy.
    const seq = this.#cache.sequenceOver(tokens as number[]);
    const res = this.#cache.admit(seq);
    if (res === null) return null;
    this.#live.set(id, seq);
    return res.hitTokens;
  }

  release(id: number): void {
    const seq = this.#live.get(id);
    if (seq === undefined) throw new Error(`request ${id} holds no blocks`);
    this.#live.delete(id);
    this.#cache.free(seq);
  }
}
