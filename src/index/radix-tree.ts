/**
 * The prefix index: which worker holds which chained block, in which tier. Nodes are the
 * router's block keys (`block-key.ts`); each worker's engine hashes map to nodes so that
 * `parentHash` and removals resolve without recomputing engine hashes (they cannot be:
 * they depend on per-process seeds). See docs/index.md for the rules and the layout.
 *
 * Memory: typed-array pools (node-store.ts, engine-hash-table.ts); no object per block.
 * Speed: no allocation per block on ingest, none per visited node in `findMatches`.
 *
 * Long file: the tree's mutation paths (store chain, remove, clear) share private
 * helpers over one node store; split, each half would need the other's internals.
 */

import type { EngineBlockHash } from "../protocol/engine-hash.js";
import type { BlockStoredEvent, KvEvent, Tier } from "../protocol/events.js";
import type { WorkerKey } from "../protocol/worker.js";
import { chainBlockKeys, rootKey } from "./block-key.js";
import { EngineHashKeys } from "./engine-hash-key.js";
import { EngineHashTable, FREE } from "./engine-hash-table.js";
import { Holdings } from "./holdings.js";
import { NodeStore } from "./node-store.js";
import { OutcomeCounter } from "./outcome-counter.js";
import type {
  ApplyResult,
  ApplyStatus,
  BlockKeySeq,
  IndexStats,
  MatchResult,
  PrefixIndex,
  WorkerMatch,
} from "./types.js";
import { WorkerSlots } from "./worker-slots.js";

// Tier bits of entries and holder words. Kept local (see block-key.ts on imports).
const GPU = 1;
const HOST = 2;
const DISK = 4;
const TIER_BITS = 7;

const result = (status: ApplyStatus): ApplyResult => Object.freeze({ status, unknownHashes: 0 });
const APPLIED = result("applied");
const PARENT_NOT_FOUND = result("parent_not_found");
const BLOCK_SIZE_MISMATCH = result("block_size_mismatch");
const INVALID_TOKEN_COUNT = result("invalid_token_count");
const NO_WORDS = new Uint32Array(0);

export interface RadixTreeOptions {
  /** Tokens per block; stored events with another block size are rejected. */
  readonly blockSize: number;
  /** Initial node capacity (pools grow as needed). */
  readonly initialCapacity?: number;
}

export class RadixTreeIndex implements PrefixIndex {
  readonly blockSize: number;
  readonly #nodes: NodeStore;
  readonly #entries: EngineHashTable;
  readonly #hashes = new EngineHashKeys();
  readonly #workers = new WorkerSlots();
  readonly #holdings: Holdings;
  readonly #outcomes = new OutcomeCounter();
  /**
   * Extra physical copies of one (worker, tier, engine hash). vLLM caches a block computed
   * by two concurrent requests twice and announces (and later removes) each copy, so the
   * hash stays cached until its last copy is removed. Rare; keyed `${w}:${bit}:${hash}`.
   */
  readonly #copies = new Map<string, number>();
  #keys = new Uint32Array(256);
  /** The worker of the last event and its slot: streams apply long runs of one worker. */
  #lastWorker: WorkerKey | null = null;
  #lastSlot = 0;

  constructor(options: RadixTreeOptions) {
    const { blockSize } = options;
    if (!Number.isInteger(blockSize) || blockSize < 1) {
      throw new RangeError(`blockSize must be a positive integer, got ${blockSize}`);
    }
    this.blockSize = blockSize;
    this.#nodes = new NodeStore(options.initialCapacity);
    this.#entries = new EngineHashTable(options.initialCapacity);
    this.#holdings = new Holdings(this.#nodes, () => this.#workers.blocks);
  }

  applyEvent(worker: WorkerKey, event: KvEvent): ApplyResult {
    const w = this.#slot(worker);
    let r: ApplyResult;
    switch (event.type) {
      case "stored":
        r = this.#stored(w, event);
        break;
      case "removed":
        r = this.#retier(
          w,
          event.blockHashes,
          NO_WORDS,
          0,
          event.blockHashes.length,
          tierBit(event.tier),
          false,
        );
        break;
      case "cleared":
        this.#clear(w);
        r = APPLIED;
        break;
      default: {
        const unknown: never = event;
        throw new TypeError(`unknown event type ${(unknown as { type: unknown }).type}`);
      }
    }
    this.#outcomes.count(event.type, r.status);
    return r;
  }

  /**
   * `applyEvent` of a stored event whose hashes are 64-bit integers given as (hi, lo)
   * words, without `EngineBlockHash` strings (the threaded ingest path, see
   * protocol/event-tape.ts). Block `i`'s hash is `words[2 * (pair + i)]`, `…+ 1`; the
   * parent's is at pair `parentPair` (−1 = root); tokens are `tokens[tokenOffset, +tokenCount)`.
   * Same rules and outcomes as `applyEvent` with the hashes' hex form.
   */
  applyStoredWords(
    worker: WorkerKey,
    words: Uint32Array,
    pair: number,
    count: number,
    parentPair: number,
    tokens: Uint32Array,
    tokenOffset: number,
    tokenCount: number,
    blockSize: number,
    tier: Tier,
    loraName: string | null,
    loraId: number | null,
  ): ApplyResult {
    const w = this.#slot(worker);
    const r = this.#storeChain(
      w,
      null,
      words,
      pair,
      count,
      null,
      parentPair,
      tokens,
      tokenOffset,
      tokenCount,
      blockSize,
      tierBit(tier),
      loraName,
      loraId,
    );
    this.#outcomes.count("stored", r.status);
    return r;
  }

  /** `applyEvent` of a removed event with 64-bit integer hashes as words (see above). */
  applyRemovedWords(
    worker: WorkerKey,
    words: Uint32Array,
    pair: number,
    count: number,
    tier: Tier,
  ): ApplyResult {
    const w = this.#slot(worker);
    const r = this.#retier(w, null, words, pair, count, tierBit(tier), false);
    this.#outcomes.count("removed", r.status);
    return r;
  }

  /** The slot of `worker`, registering it on first sight. */
  #slot(worker: WorkerKey): number {
    if (worker === this.#lastWorker) return this.#lastSlot;
    const w = this.#workers.ensure(worker);
    this.#lastWorker = worker;
    this.#lastSlot = w;
    return w;
  }

  removeWorker(worker: WorkerKey): void {
    const w = this.#workers.slotOf(worker);
    if (w === undefined) return;
    this.#clear(w);
    this.#workers.release(w);
    this.#lastWorker = null;
  }

  findMatches(keys: BlockKeySeq): MatchResult {
    const workers = this.#workers;
    const order = workers.order();
    const gpu = workers.gpuRun;
    const host = workers.hostRun;
    const disk = workers.diskRun;
    for (let s = 0; s < order.length; s++) {
      const w = order[s]!;
      gpu[w] = 0;
      host[w] = 0;
      disk[w] = 0;
    }
    this.#nodes.matchRuns(keys, gpu, host, disk);
    const n = keys.length >>> 1;
    const out: WorkerMatch[] = new Array(order.length);
    for (let s = 0; s < order.length; s++) {
      const w = order[s]!;
      out[s] = {
        worker: workers.keyOf(w),
        gpu: gpu[w]!,
        host: host[w]!,
        disk: disk[w]!,
        totalBlocks: workers.blocks[w]!,
      };
    }
    return { blocks: n, workers: out };
  }

  stats(): IndexStats {
    return {
      nodes: this.#nodes.live,
      workers: this.#workers.count,
      workerBlocks: this.#holdings.total,
      outcomes: this.#outcomes.toRecord(),
    };
  }

  /** Approximate bytes of the index's typed arrays (capacity), for benchmarks. */
  get capacityBytes(): number {
    return this.#nodes.capacityBytes + this.#entries.capacityBytes;
  }

  #stored(w: number, ev: BlockStoredEvent): ApplyResult {
    const hashes = ev.blockHashes;
    const tokens = ev.tokenIds;
    return this.#storeChain(
      w,
      hashes,
      NO_WORDS,
      0,
      hashes.length,
      ev.parentHash,
      -1,
      tokens,
      0,
      tokens.length,
      ev.blockSize,
      tierBit(ev.tier),
      ev.loraName,
      ev.loraId,
    );
  }

  /**
   * The one implementation of a stored event, for both hash sources: `hashes` (strings)
   * when not null, else pairs `[pair, pair + n)` of `words` (parent: `parentHash` or
   * `parentPair`, see `#setKey`).
   */
  #storeChain(
    w: number,
    hashes: readonly EngineBlockHash[] | null,
    words: Uint32Array,
    pair: number,
    n: number,
    parentHash: EngineBlockHash | null,
    parentPair: number,
    tokens: ArrayLike<number>,
    tokenOffset: number,
    tokenCount: number,
    blockSize: number,
    bit: number,
    loraName: string | null,
    loraId: number | null,
  ): ApplyResult {
    // Offload placeholder: blocks already known by hash gain a tier.
    if (tokenCount === 0) return this.#retier(w, hashes, words, pair, n, bit, true);
    const bs = this.blockSize;
    if (blockSize !== bs) return BLOCK_SIZE_MISMATCH;
    if (tokenCount !== n * bs) return INVALID_TOKEN_COUNT;
    let parent = -1;
    let phi: number;
    let plo: number;
    if (hashes !== null ? parentHash === null : parentPair < 0) {
      const root = rootKey(adapterOf(loraName, loraId));
      phi = root[0];
      plo = root[1];
    } else {
      const e =
        hashes !== null ? this.#lookup(w, parentHash!) : this.#lookupWords(w, words, parentPair);
      if (e < 0) return PARENT_NOT_FOUND;
      parent = this.#entries.node(e);
      phi = this.#nodes.keyHi(parent);
      plo = this.#nodes.keyLo(parent);
    }
    if (this.#keys.length < 2 * n) this.#keys = new Uint32Array(2 * n);
    const keys = this.#keys;
    chainBlockKeys(phi, plo, tokens, tokenOffset, n, bs, keys, 0);
    const nodes = this.#nodes;
    let prev = parent;
    for (let i = 0; i < n; i++) {
      const hi = keys[2 * i]!;
      const lo = keys[2 * i + 1]!;
      let node = nodes.find(hi, lo);
      if (node < 0) node = nodes.create(hi, lo, prev);
      this.#setKey(hashes, words, pair + i, true);
      this.#register(w, node, bit);
      prev = node;
    }
    return APPLIED;
  }

  /**
   * Loads hash `i` of the source into the key parser (`hashes[i]`, or the integer at
   * pair `i` of `words`). False when a string hash was never interned and `intern` is off.
   */
  #setKey(
    hashes: readonly EngineBlockHash[] | null,
    words: Uint32Array,
    i: number,
    intern: boolean,
  ): boolean {
    if (hashes !== null) return this.#hashes.parse(hashes[i]!, intern);
    this.#hashes.setInt(words[2 * i]!, words[2 * i + 1]!);
    return true;
  }

  /** Worker `w` holds `node` in tier `bit` under the key just loaded by `#setKey`. */
  #register(w: number, node: number, bit: number): void {
    const hk = this.#hashes;
    const wk = (w << 1) | hk.kind;
    const entries = this.#entries;
    const e = entries.find(wk, hk.hi, hk.lo);
    if (e < 0) {
      entries.insert(wk, hk.hi, hk.lo, node, bit);
      if (hk.kind !== 0) hk.retain(hk.lo);
      this.#holdings.attach(node, w, bit);
      return;
    }
    const meta = entries.meta(e);
    const mask = meta & TIER_BITS;
    const old = entries.node(e);
    if (old === node) {
      if ((mask & bit) === 0) {
        entries.setMeta(e, meta | bit);
        this.#holdings.change(node, w, mask, mask | bit);
      } else {
        const ck = copyKey(w, bit, hk.current());
        this.#copies.set(ck, (this.#copies.get(ck) ?? 0) + 1);
      }
      return;
    }
    // The engine reused the hash for another block (e.g. re-stored under a new parent
    // after an eviction we did not see): an engine hash names one block at a time, so the
    // old placement is stale. Move the entry; the new placement has only this tier.
    if (this.#copies.size > 0) {
      const hash = hk.current();
      for (const b of [GPU, HOST, DISK]) this.#copies.delete(copyKey(w, b, hash));
    }
    entries.setNode(e, node);
    entries.setMeta(e, (meta & ~TIER_BITS) | bit);
    this.#holdings.change(old, w, mask, 0);
    this.#holdings.attach(node, w, bit);
    this.#prune(old);
  }

  /**
   * Adds (`add`) or removes tier `bit` for blocks already known by hash. Unknown hashes
   * (or, on removal, hashes not held in that tier) are counted; the rest are applied.
   */
  #retier(
    w: number,
    hashes: readonly EngineBlockHash[] | null,
    words: Uint32Array,
    pair: number,
    n: number,
    bit: number,
    add: boolean,
  ): ApplyResult {
    const entries = this.#entries;
    let unknown = 0;
    for (let i = 0; i < n; i++) {
      const e = this.#setKey(hashes, words, pair + i, false) ? this.#findKey(w) : -1;
      if (e < 0) {
        unknown++;
        continue;
      }
      const meta = entries.meta(e);
      const mask = meta & TIER_BITS;
      const node = entries.node(e);
      if (add) {
        if ((mask & bit) !== 0) continue;
        entries.setMeta(e, meta | bit);
        this.#holdings.change(node, w, mask, mask | bit);
      } else {
        if ((mask & bit) === 0) {
          unknown++;
          continue;
        }
        if (this.#copies.size > 0 && this.#dropCopy(w, bit, this.#hashes.current())) continue;
        const left = mask & ~bit;
        this.#holdings.change(node, w, mask, left);
        if (left === 0) {
          this.#dropEntry(e);
          this.#prune(node);
        } else {
          entries.setMeta(e, meta & ~bit);
        }
      }
    }
    if (unknown === 0) return APPLIED;
    return { status: "block_not_found", unknownHashes: unknown };
  }

  /** Removes one extra copy of (w, tier, hash) if there is one. */
  #dropCopy(w: number, bit: number, hash: EngineBlockHash): boolean {
    const ck = copyKey(w, bit, hash);
    const n = this.#copies.get(ck);
    if (n === undefined) return false;
    if (n > 1) this.#copies.set(ck, n - 1);
    else this.#copies.delete(ck);
    return true;
  }

  /** Every block of worker `w` goes (its slot stays registered). */
  #clear(w: number): void {
    if (this.#copies.size > 0) {
      const prefix = `${w}:`;
      for (const k of this.#copies.keys()) if (k.startsWith(prefix)) this.#copies.delete(k);
    }
    const entries = this.#entries;
    const top = entries.top;
    for (let e = 0; e < top; e++) {
      const meta = entries.meta(e);
      if (meta === FREE || meta >>> 4 !== w) continue;
      const node = entries.node(e);
      this.#holdings.change(node, w, meta & TIER_BITS, 0);
      this.#dropEntry(e);
      this.#prune(node);
    }
  }

  /** Entry of worker `w`'s engine hash, or −1. */
  #lookup(w: number, hash: EngineBlockHash): number {
    if (!this.#hashes.parse(hash, false)) return -1;
    return this.#findKey(w);
  }

  /** Entry of worker `w`'s integer hash at pair `i` of `words`, or −1. */
  #lookupWords(w: number, words: Uint32Array, i: number): number {
    this.#hashes.setInt(words[2 * i]!, words[2 * i + 1]!);
    return this.#findKey(w);
  }

  /** Entry of worker `w` under the key loaded in the parser, or −1. */
  #findKey(w: number): number {
    const hk = this.#hashes;
    return this.#entries.find((w << 1) | hk.kind, hk.hi, hk.lo);
  }

  #dropEntry(e: number): void {
    const entries = this.#entries;
    if ((entries.meta(e) >>> 3) & 1) this.#hashes.release(entries.lo(e));
    entries.remove(e);
  }

  /** Frees `node` and then its ancestors while they have neither holders nor children. */
  #prune(node: number): void {
    const nodes = this.#nodes;
    while (node >= 0 && nodes.isUnused(node)) node = nodes.free(node);
  }
}

/**
 * The adapter a stored event's chain is rooted at. Engines that send only the numeric
 * `lora_id` (SGLang, older vLLM) still cache adapter blocks apart from the base model's:
 * they get a root of their own that no request's `lora_name` names (NUL-prefixed), so
 * they never match a base-model prompt. `lora_id` 0 or null is the base model.
 */
function adapterOf(loraName: string | null, loraId: number | null): string | null {
  if (loraName !== null && loraName !== "") return loraName;
  return loraId ? `\u0000lora_id:${loraId}` : null;
}

function copyKey(w: number, bit: number, hash: EngineBlockHash): string {
  return `${w}:${bit}:${hash}`;
}

function tierBit(tier: Tier): number {
  switch (tier) {
    case "gpu":
      return GPU;
    case "host":
      return HOST;
    case "disk":
      return DISK;
    default: {
      const unknown: never = tier;
      throw new TypeError(`unknown tier ${String(unknown)}`);
    }
  }
}
