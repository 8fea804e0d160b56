/**
 * Turns decoded Mooncake store events into `KvEvent`s for the store holder (the
 * pseudo-worker `store:<name>#0` in the index).
 *
 * Mooncake speaks in objects (`mooncake_key`) with a replica list that later changes
 * wholesale (`BlockUpdateEvent`), while the index speaks in blocks per tier. So this
 * adapter remembers, per key, the block's engine hash and the tiers it is on, and turns
 * a new replica list into tier adds and removes. Several keys may carry the same block
 * hash (e.g. one object per tensor-parallel shard), so a block stays on a tier until
 * the last key holding it there is gone. Pure and synchronous: one adapter per store
 * stream, fed in order, `reset()` when that stream's state is lost.
 *
 * One store may hold several models' KV, and two models with one tokenizer give the same
 * tokens (and block hashes) for the same prompt. A block stored with a `model_name` is
 * therefore that model's: its hash and parent are qualified by the model
 * (`engineHashInModel`) and its chain rooted at `modelChain(model)`, so the index keys it
 * apart from every other model's and the router finds it only for requests of that model
 * (docs/cost-function.md, "Shared stores and models"). A block without one keeps its hash
 * and the plain chain: its model is unknown.
 */

import { type EngineBlockHash, engineHashFromString, engineHashInModel } from "./engine-hash.js";
import { type BlockStoredEvent, type KvEvent, TIERS, type Tier, tierOfMedium } from "./events.js";
import type { MooncakeBatch, MooncakeEvent, MooncakeReplica } from "./mooncake-codec.js";
import { modelChain } from "./store-model.js";

interface KeyState {
  readonly id: EngineBlockHash;
  readonly parent: EngineBlockHash | null;
  /** Tier → the replica type that put the block there (used as the event's medium). */
  tiers: Map<Tier, string>;
}

export interface MooncakeAdapterStats {
  /** Keys currently known. */
  readonly keys: number;
  /** `BlockUpdateEvent`s for a key never stored (or already gone): nothing to place. */
  readonly unknownKeyUpdates: number;
  /** `BlockStoreEvent`s with no replica at all: nothing stored. */
  readonly emptyStores: number;
  /** `BlockStoreEvent`s that reused a known key for a different block hash. */
  readonly rekeyed: number;
}

const NO_TOKENS = new Uint32Array(0);

export class MooncakeStoreAdapter {
  #keys = new Map<string, KeyState>();
  /** `${tier}|${hash}` → number of keys holding that block on that tier. */
  #holders = new Map<string, number>();
  #unknownKeyUpdates = 0;
  #emptyStores = 0;
  #rekeyed = 0;

  /** The `KvEvent`s one decoded batch amounts to, in order. */
  applyBatch(batch: MooncakeBatch): KvEvent[] {
    const out: KvEvent[] = [];
    for (const e of batch.events) out.push(...this.apply(e));
    return out;
  }

  /** The `KvEvent`s one Mooncake event amounts to (possibly none). */
  apply(event: MooncakeEvent): KvEvent[] {
    switch (event.type) {
      case "BlockStoreEvent": {
        // No block hash: the object key is the only id the store gives us.
        const model = event.modelName;
        const raw = event.blockHash ?? engineHashFromString(event.key);
        const id = model === "" ? raw : engineHashInModel(model, raw);
        const parent =
          event.parentHash === null || model === ""
            ? event.parentHash
            : engineHashInModel(model, event.parentHash);
        const out: KvEvent[] = [];
        let prev = this.#keys.get(event.key);
        if (prev !== undefined && prev.id !== id) {
          this.#rekeyed++;
          out.push(...this.#retier(event.key, prev, new Map()));
          prev = undefined;
        }
        const tiers = tiersOf(event.replicas);
        if (tiers.size === 0 && prev === undefined) {
          this.#emptyStores++;
          return out;
        }
        // One Mooncake object is one block: its tokens are the block, whatever block_size says.
        const template: BlockStoredEvent = {
          type: "stored",
          blockHashes: [id],
          parentHash: parent,
          tokenIds: event.tokenIds,
          blockSize: event.tokenIds.length,
          loraId: null,
          // The chain's root: the model's own (a block with a parent continues its chain).
          loraName: model === "" || parent !== null ? null : modelChain(model, null),
          medium: null,
          tier: "gpu",
        };
        const state = prev ?? { id, parent, tiers: new Map() };
        out.push(...this.#retier(event.key, state, tiers, template));
        return out;
      }
      case "BlockUpdateEvent": {
        const prev = this.#keys.get(event.key);
        if (prev === undefined) {
          if (event.replicas.length > 0) this.#unknownKeyUpdates++;
          return [];
        }
        return this.#retier(event.key, prev, tiersOf(event.replicas));
      }
      case "RemoveAllEvent":
        this.reset();
        return [{ type: "cleared" }];
    }
  }

  /** Forget everything (the stream was lost or restarted; the holder is cleared too). */
  reset(): void {
    this.#keys.clear();
    this.#holders.clear();
  }

  stats(): MooncakeAdapterStats {
    return {
      keys: this.#keys.size,
      unknownKeyUpdates: this.#unknownKeyUpdates,
      emptyStores: this.#emptyStores,
      rekeyed: this.#rekeyed,
    };
  }

  /**
   * Move a key from its current tiers to `next`: removed events for tiers it leaves
   * (if no other key holds the block there), stored events for tiers it joins (full
   * with tokens when a `template` is given, else token-less placeholders).
   */
  #retier(
    key: string,
    state: KeyState,
    next: Map<Tier, string>,
    template?: BlockStoredEvent,
  ): KvEvent[] {
    const out: KvEvent[] = [];
    for (const [tier, medium] of state.tiers) {
      if (next.has(tier) || !this.#release(tier, state.id)) continue;
      out.push({ type: "removed", blockHashes: [state.id], medium, tier });
    }
    for (const [tier, medium] of next) {
      if (state.tiers.has(tier) || !this.#acquire(tier, state.id)) continue;
      const base: BlockStoredEvent = template ?? {
        type: "stored",
        blockHashes: [state.id],
        parentHash: state.parent,
        tokenIds: NO_TOKENS,
        blockSize: 0,
        loraId: null,
        loraName: null,
        medium: null,
        tier,
      };
      out.push({ ...base, medium, tier });
    }
    state.tiers = next;
    if (next.size === 0) this.#keys.delete(key);
    else this.#keys.set(key, state);
    return out;
  }

  /** True when this key is the first holder of the block on the tier. */
  #acquire(tier: Tier, id: EngineBlockHash): boolean {
    const k = `${tier}|${id}`;
    const n = (this.#holders.get(k) ?? 0) + 1;
    this.#holders.set(k, n);
    return n === 1;
  }

  /** True when this key was the last holder of the block on the tier. */
  #release(tier: Tier, id: EngineBlockHash): boolean {
    const k = `${tier}|${id}`;
    const n = (this.#holders.get(k) ?? 1) - 1;
    if (n > 0) this.#holders.set(k, n);
    else this.#holders.delete(k);
    return n <= 0;
  }
}

/** Replica list → tiers (in TIERS order), each with the first replica type seen for it. */
function tiersOf(replicas: readonly MooncakeReplica[]): Map<Tier, string> {
  const found = new Map<Tier, string>();
  for (const r of replicas) {
    const tier = tierOfMedium(r.type === "" ? "disk" : r.type);
    if (!found.has(tier)) found.set(tier, r.type);
  }
  const ordered = new Map<Tier, string>();
  for (const t of TIERS) {
    const m = found.get(t);
    if (m !== undefined) ordered.set(t, m);
  }
  return ordered;
}
