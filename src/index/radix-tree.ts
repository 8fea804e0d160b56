/**
 * The prefix index: which worker holds which chained block, in which tier. Nodes are the
 * router's block keys (`block-key.ts`); each worker's engine hashes map to nodes so that
 * `parentHash` and removals resolve without recomputing engine hashes (they cannot be:
 * they depend on per-process seeds). See docs/index.md for the rules and the layout.
 *
 * Memory: typed-array pools (node-store.ts, engine-hash-table.ts); no object per block.
 * Speed: no allocation per block on ingest, none per visited node in `findMatches`.
 *
 * Clearing a worker (a `cleared` event, `removeWorker`, a capacity overflow) is O(1): its
 * slot is retired (its key gets a fresh slot; lookups never credit a retired slot) and
 * its entries are reclaimed later in bounded slices by `reclaim(budget)`, which the
 * service drives from its event loop. Bounds: an optional global cap on entries (the
 * least recently stored go first) and a per-worker cap on GPU entries from the engine's
 * own capacity (`setWorkerCapacity`): holding more than the engine can is proof of lost
 * removals, and the worker is reset.
 *
 * Long file: the tree's mutation paths (store chain, remove, retire and reclaim, the
 * bounds' evictions) share private helpers over one node store and one entry table;
 * split, each half would need the other's internals.
 */

import type { EngineBlockHash } from "../protocol/engine-hash.js";
import type { BlockStoredEvent, KvEvent, Tier } from "../protocol/events.js";
import type { WorkerKey } from "../protocol/worker.js";
import { chainBlockKeys, rootKey } from "./block-key.js";
import { EngineHashKeys } from "./engine-hash-key.js";
import { EngineHashTable, FREE } from "./engine-hash-table.js";
import { Holdings } from "./holdings.js";
import { MatchBuffer } from "./match-buffer.js";
import { NodeStore } from "./node-store.js";
import { OutcomeCounter } from "./outcome-counter.js";
import { bufferFor } from "./record-pool.js";
import type { IndexCapture, SnapshotAccess } from "./snapshot-access.js";
import type {
  ApplyResult,
  ApplyStatus,
  BlockKeySeq,
  HashWords,
  IndexStats,
  IndexUpkeep,
  MatchResult,
  PrefixIndex,
  RemovedWords,
  StoredWords,
  WordsIndex,
  WorkerMatch,
} from "./types.js";
import { MAX_WORKERS, WorkerSlots } from "./worker-slots.js";

// Tier bits of entries and holder words. Kept local (see block-key.ts on imports).
const GPU = 1;
const HOST = 2;
const DISK = 4;
const TIER_BITS = 7;

const result = (status: ApplyStatus): ApplyResult => Object.freeze({ status, unknownHashes: 0 });
const APPLIED = result("applied");
const PARENT_NOT_FOUND = result("parent_not_found");
const PARENT_AMBIGUOUS = result("parent_ambiguous");
const BLOCK_SIZE_MISMATCH = result("block_size_mismatch");
const INVALID_TOKEN_COUNT = result("invalid_token_count");
const NO_WORDS = new Uint32Array(0) as HashWords;
const NO_MATCHES: readonly WorkerMatch[] = Object.freeze([]);

/**
 * The hashes of one event: strings (`hashes` not null; hash i is `hashes[first + i]`) or
 * the word pairs of `words` (hash i is pair `first + i`). One scratch object per index.
 */
interface HashSource {
  hashes: readonly EngineBlockHash[] | null;
  words: HashWords;
  first: number;
  count: number;
}

/** A stored event from either source; the parent is `parentHash` or pair `parentPair`. */
interface Chain extends HashSource {
  parentHash: EngineBlockHash | null;
  parentPair: number;
  tokens: ArrayLike<number>;
  tokenOffset: number;
  tokenCount: number;
  blockSize: number;
  bit: number;
  loraName: string | null;
  loraId: number | null;
}

/** One `reclaim` budget unit pays for one entry looked at; dropping one and freeing nodes cost more. */
const DROP_COST = 16;
const FREE_NODE_COST = 4;
/** A `reclaim` budget of about half a millisecond on a current core. */
export const RECLAIM_SLICE = 1 << 14;

export interface RadixTreeOptions {
  /** Tokens per block; stored events with another block size are rejected. */
  readonly blockSize: number;
  /** Initial node capacity (pools grow as needed). */
  readonly initialCapacity?: number;
  /**
   * Most (worker, engine hash) entries the index keeps, over all workers; past it the
   * least recently stored are evicted (counted in `stats().capEvictions`). 0 = no cap.
   */
  readonly maxBlocks?: number;
}

export class RadixTreeIndex implements PrefixIndex, WordsIndex, IndexUpkeep {
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
   * hash stays cached until its last copy is removed. Rare; keyed `entry * 8 + tier bit`
   * (an entry is one (worker, hash); its copies go when it goes).
   */
  readonly #copies = new Map<number, number>();
  /**
   * Per slot, the engine hashes that worker was seen using for two different blocks (a
   * hash stored again under another parent while still held: SGLang's unchained
   * `hash(tuple(page_tokens))`, or a missed removal), keyed `kind:hi:lo` → the interned
   * id kept for it (−1 for integer hashes). A parent named by one of them is ambiguous: the
   * engine may mean the block the index no longer maps it to, so chaining from the one it
   * maps would index blocks under a prefix the worker does not hold. Kept until the
   * worker is cleared (an entry dropped and stored again does not make the hash unique).
   */
  readonly #reused = new Map<number, Map<string, number>>();
  readonly #maxBlocks: number;
  /** Retired slots whose entries are not all reclaimed yet (flag per slot, and a list). */
  readonly #retired = new Uint8Array(MAX_WORKERS);
  readonly #zombies: number[] = [];
  /** Where the reclaim sweep resumes in the entry records, and entries seen since a drop. */
  #cursor = 0;
  #sinceDrop = 0;
  /** GPU capacity per worker key, kept across the key's slots. */
  readonly #caps = new Map<WorkerKey, number>();
  /** Bumped by every change: a capture taken in steps is whole only if it did not move. */
  #version = 0;
  /** Told of each block a removed event takes out of a worker's GPU tier (`onGpuRemoved`). */
  #gpuRemoved: ((worker: WorkerKey, hi: number, lo: number) => void) | null = null;
  #capEvictions = 0;
  #overflowResets = 0;
  #keys = new Uint32Array(256);
  /** findMatches' own answer buffer. */
  readonly #match = new MatchBuffer();
  readonly #chain: Chain = {
    hashes: null,
    words: NO_WORDS,
    first: 0,
    count: 0,
    parentHash: null,
    parentPair: -1,
    tokens: NO_WORDS,
    tokenOffset: 0,
    tokenCount: 0,
    blockSize: 0,
    bit: 0,
    loraName: null,
    loraId: null,
  };
  /** The worker of the last event and its slot: streams apply long runs of one worker. */
  #lastWorker: WorkerKey | null = null;
  #lastSlot = 0;
  /** Where `#warm` leaves its loads' result, so that they are not optimised away. */
  readonly #sink = new Int32Array(1);

  constructor(options: RadixTreeOptions) {
    const { blockSize } = options;
    if (!Number.isInteger(blockSize) || blockSize < 1) {
      throw new RangeError(`blockSize must be a positive integer, got ${blockSize}`);
    }
    const maxBlocks = options.maxBlocks ?? 0;
    if (!Number.isInteger(maxBlocks) || maxBlocks < 0) {
      throw new RangeError(`maxBlocks must be a non-negative integer, got ${maxBlocks}`);
    }
    this.blockSize = blockSize;
    this.#maxBlocks = maxBlocks;
    this.#nodes = new NodeStore(options.initialCapacity);
    this.#entries = new EngineHashTable(options.initialCapacity);
    this.#holdings = new Holdings(this.#nodes, this.#workers);
  }

  applyEvent(worker: WorkerKey, event: KvEvent): ApplyResult {
    this.#version++;
    const w = this.#slot(worker);
    let r: ApplyResult;
    switch (event.type) {
      case "stored":
        r = this.#stored(w, event);
        break;
      case "removed":
        r = this.#retier(w, this.#strings(event.blockHashes), tierBit(event.tier), false);
        break;
      case "cleared":
        this.#retire(w);
        this.#slot(worker);
        r = APPLIED;
        break;
      default: {
        const unknown: never = event;
        throw new TypeError(`unknown event type ${(unknown as { type: unknown }).type}`);
      }
    }
    this.#release(this.#chain);
    this.#outcomes.count(event.type, r.status);
    this.#bound(worker);
    return r;
  }

  /**
   * Drops the scratch's references to the caller's arrays once an event is applied: a
   * view keeps its whole buffer alive (a decode thread's tape group, or a benchmark's
   * workload arena of tens of MB).
   */
  #release(c: Chain): void {
    c.hashes = null;
    c.words = NO_WORDS;
    c.tokens = NO_WORDS;
  }

  /** `applyEvent` of a stored event whose hashes are 64-bit integers given as words. */
  applyStoredWords(worker: WorkerKey, ev: StoredWords): ApplyResult {
    this.#version++;
    const w = this.#slot(worker);
    const c = this.#chain;
    c.hashes = null;
    c.words = ev.hashes;
    c.first = ev.first;
    c.count = ev.count;
    c.parentHash = null;
    c.parentPair = ev.parentPair;
    c.tokens = ev.tokens;
    c.tokenOffset = ev.tokenOffset;
    c.tokenCount = ev.tokenCount;
    c.blockSize = ev.blockSize;
    c.bit = tierBit(ev.tier);
    c.loraName = ev.loraName;
    c.loraId = ev.loraId;
    const r = this.#storeChain(w, c);
    this.#release(c);
    this.#outcomes.count("stored", r.status);
    this.#bound(worker);
    return r;
  }

  /** `applyEvent` of a removed event with 64-bit integer hashes as words. */
  applyRemovedWords(worker: WorkerKey, ev: RemovedWords): ApplyResult {
    this.#version++;
    const w = this.#slot(worker);
    const c = this.#chain;
    c.hashes = null;
    c.words = ev.hashes;
    c.first = ev.first;
    c.count = ev.count;
    const r = this.#retier(w, c, tierBit(ev.tier), false);
    this.#release(c);
    this.#outcomes.count("removed", r.status);
    return r;
  }

  /** The scratch source loaded with string hashes. */
  #strings(hashes: readonly EngineBlockHash[]): HashSource {
    const c = this.#chain;
    c.hashes = hashes;
    c.words = NO_WORDS;
    c.first = 0;
    c.count = hashes.length;
    return c;
  }

  /** The slot of `worker`, registering it on first sight. */
  #slot(worker: WorkerKey): number {
    if (worker === this.#lastWorker) return this.#lastSlot;
    const w = this.#workers.ensure(worker);
    if (this.#caps.size > 0) this.#workers.gpuCap[w] = this.#caps.get(worker) ?? 0;
    this.#lastWorker = worker;
    this.#lastSlot = w;
    return w;
  }

  /** O(1): the worker stops matching at once; its memory goes through `reclaim`. */
  removeWorker(worker: WorkerKey): void {
    this.#version++;
    const w = this.#workers.slotOf(worker);
    if (w === undefined) return;
    this.#retire(w);
  }

  /**
   * The most blocks `worker`'s engine holds in GPU memory (vLLM's `num_gpu_blocks`), or
   * null for unknown. Kept across clears. A worker found holding more GPU blocks than that
   * has lost removals: it is reset at once (counted in `stats().overflowResets`).
   */
  setWorkerCapacity(worker: WorkerKey, gpuBlocks: number | null): void {
    if (gpuBlocks !== null && !(Number.isInteger(gpuBlocks) && gpuBlocks > 0)) {
      throw new RangeError(`gpuBlocks must be a positive integer or null, got ${gpuBlocks}`);
    }
    this.#version++;
    if (gpuBlocks === null) this.#caps.delete(worker);
    else this.#caps.set(worker, gpuBlocks);
    const w = this.#workers.slotOf(worker);
    if (w === undefined) return;
    this.#workers.gpuCap[w] = gpuBlocks ?? 0;
    this.#bound(worker);
  }

  /** True while cleared workers' entries wait for `reclaim`. */
  get reclaimPending(): boolean {
    return this.#zombies.length > 0;
  }

  /**
   * Frees some of the memory of cleared workers: looks at up to about `budget` entries
   * (dropping one costs 16 more, each node it frees 4). Returns whether work remains. Call it in slices
   * (default `RECLAIM_SLICE`) between other work; routing is correct either way.
   */
  reclaim(budget: number = RECLAIM_SLICE): boolean {
    const zombies = this.#zombies;
    if (zombies.length === 0) return false;
    this.#version++;
    const entries = this.#entries;
    const retired = this.#retired;
    const blocks = this.#workers.blocks;
    let cursor = this.#cursor;
    let spent = 0;
    while (spent < budget && zombies.length > 0) {
      const top = entries.top;
      if (cursor >= top) cursor = 0;
      if (this.#sinceDrop > top) {
        // A whole sweep found nothing more of them: nothing is left (defensive).
        while (zombies.length > 0) this.#finish(zombies[zombies.length - 1]!);
        break;
      }
      const e = cursor++;
      spent++;
      this.#sinceDrop++;
      const meta = entries.meta(e);
      if (meta === FREE) continue;
      const w = meta >>> 4;
      if (retired[w] === 0) continue;
      spent += DROP_COST + FREE_NODE_COST * this.#drop(e, w, meta);
      this.#sinceDrop = 0;
      if (blocks[w] === 0) this.#finish(w);
    }
    this.#cursor = cursor;
    return zombies.length > 0;
  }

  /**
   * Only workers holding the prompt's first block come back (callers read an absent
   * worker as no match): the cost is the holders met along the prompt's path, not the
   * fleet. Built on `matchInto`; the objects and the key order cost one step per holder.
   */
  findMatches(keys: BlockKeySeq): MatchResult {
    const buf = this.#match;
    this.matchInto(keys, buf);
    const count = buf.count;
    if (count === 0) return { blocks: buf.blocks, workers: NO_MATCHES };
    const workers = this.#workers;
    const gpu = workers.gpuRun;
    const host = workers.hostRun;
    const disk = workers.diskRun;
    const touched = workers.touched;
    const first = buf.first;
    const at = buf.firstAt;
    for (let k = 0; k < count; k++) {
      const x = first[at + k]!;
      const w = x >>> 4;
      touched[k] = w;
      disk[w] = 1;
      host[w] = (x & 3) !== 0 ? 1 : 0;
      gpu[w] = x & 1;
    }
    for (let j = 0; j < buf.deepCount; j++) {
      const w = buf.deepSlot[j]!;
      disk[w] = buf.deepDisk[j]!;
      host[w] = buf.deepHost[j]!;
      gpu[w] = buf.deepGpu[j]!;
    }
    const order = workers.sortMatched(count);
    const out: WorkerMatch[] = new Array(count);
    for (let s = 0; s < count; s++) {
      const w = order[s]!;
      out[s] = {
        worker: workers.keyOf(w),
        gpu: gpu[w]!,
        host: host[w]!,
        disk: disk[w]!,
        totalBlocks: workers.blocks[w]!,
      };
    }
    for (let k = 0; k < count; k++) {
      const w = touched[k]!;
      gpu[w] = 0;
      host[w] = 0;
      disk[w] = 0;
    }
    return { blocks: buf.blocks, workers: out };
  }

  /**
   * `findMatches` without an object per worker: fills `out` (see match-buffer.ts) with
   * the holder words of the prompt's first block and the workers matching deeper. A
   * prompt the whole fleet holds the first block of costs one copy of that block's
   * holder list, not a step per holder and level. Returns `out`.
   */
  matchInto(keys: BlockKeySeq, out: MatchBuffer): MatchBuffer {
    const w = this.#workers;
    const skip = this.#zombies.length > 0 ? this.#retired : null;
    this.#nodes.matchInto(keys, out, skip, w.gpuRun, w.hostRun, w.diskRun);
    return out;
  }

  /**
   * Call `listener` with the worker and the router's block key (unsigned words) of each
   * block an engine's removed event takes out of that worker's GPU tier (the router's
   * predictions of it go: `PredictedBlocks.removed`). Every listener added is called, in
   * the order added: two routers over one index each drop their own predictions.
   */
  onGpuRemoved(listener: (worker: WorkerKey, hi: number, lo: number) => void): void {
    const before = this.#gpuRemoved;
    this.#gpuRemoved =
      before === null
        ? listener
        : (w, hi, lo) => {
            before(w, hi, lo);
            listener(w, hi, lo);
          };
  }

  /** Worker key of a slot in a `matchInto` answer (valid until the next event). */
  slotKey(slot: number): WorkerKey {
    return this.#workers.keyOf(slot);
  }

  /** Distinct blocks the worker in `slot` holds (a `matchInto` answer's `totalBlocks`). */
  slotBlocks(slot: number): number {
    return this.#workers.blocks[slot]!;
  }

  /** Distinct blocks `worker` holds, any tier (0 for a worker the index does not know). */
  workerBlocks(worker: WorkerKey): number {
    const w = this.#workers.slotOf(worker);
    return w === undefined ? 0 : this.#workers.blocks[w]!;
  }

  stats(): IndexStats {
    let pending = 0;
    for (const z of this.#zombies) pending += this.#workers.blocks[z]!;
    return {
      nodes: this.#nodes.live,
      workers: this.#workers.count,
      workerBlocks: this.#holdings.total - pending,
      outcomes: this.#outcomes.toRecord(),
      reclaimPendingBlocks: pending,
      capEvictions: this.#capEvictions,
      overflowResets: this.#overflowResets,
    };
  }

  /** Approximate bytes of the index's typed arrays (capacity), for benchmarks. */
  get capacityBytes(): number {
    return this.#nodes.capacityBytes + this.#entries.capacityBytes;
  }

  /**
   * Bytes written in the index's growable pools (records and holder lists up to
   * their high-water marks, see record-pool.ts: their capacity beyond is committed but
   * never touched), which `process.memoryUsage().arrayBuffers` does not count: add them
   * to it for the index's whole footprint.
   */
  get poolBytes(): number {
    return this.#nodes.poolBytes + this.#entries.poolBytes;
  }

  #stored(w: number, ev: BlockStoredEvent): ApplyResult {
    const c = this.#chain;
    this.#strings(ev.blockHashes);
    c.parentHash = ev.parentHash;
    c.parentPair = -1;
    c.tokens = ev.tokenIds;
    c.tokenOffset = 0;
    c.tokenCount = ev.tokenIds.length;
    c.blockSize = ev.blockSize;
    c.bit = tierBit(ev.tier);
    c.loraName = ev.loraName;
    c.loraId = ev.loraId;
    return this.#storeChain(w, c);
  }

  /** The one implementation of a stored event, for both hash sources (see `Chain`). */
  #storeChain(w: number, c: Chain): ApplyResult {
    const n = c.count;
    const bit = c.bit;
    // Offload placeholder: blocks already known by hash gain a tier.
    if (c.tokenCount === 0) return this.#retier(w, c, bit, true);
    const bs = this.blockSize;
    if (c.blockSize !== bs) return BLOCK_SIZE_MISMATCH;
    if (c.tokenCount !== n * bs) return INVALID_TOKEN_COUNT;
    let parent = -1;
    let phi: number;
    let plo: number;
    if (c.hashes !== null ? c.parentHash === null : c.parentPair < 0) {
      const root = rootKey(adapterOf(c.loraName, c.loraId));
      phi = root[0] | 0;
      plo = root[1] | 0;
    } else {
      const e =
        c.hashes !== null
          ? this.#lookup(w, c.parentHash!)
          : this.#lookupWords(w, c.words, c.parentPair);
      if (e < 0) return PARENT_NOT_FOUND;
      if (this.#reused.size > 0 && this.#isReused(w)) return PARENT_AMBIGUOUS;
      parent = this.#entries.node(e);
      phi = this.#nodes.keyHi(parent);
      plo = this.#nodes.keyLo(parent);
    }
    if (this.#keys.length < 2 * n) this.#keys = new Uint32Array(2 * n);
    const keys = this.#keys;
    chainBlockKeys(phi, plo, c.tokens, c.tokenOffset, n, bs, keys, 0);
    const nodes = this.#nodes;
    if (n > 1) this.#warm(w, c, n);
    let prev = parent;
    for (let i = 0; i < n; i++) {
      const hi = keys[2 * i]! | 0;
      const lo = keys[2 * i + 1]! | 0;
      let node = nodes.find(hi, lo);
      if (node < 0) node = nodes.create(hi, lo, prev);
      this.#setKey(c, c.first + i, true);
      this.#register(w, node, bit);
      prev = node;
    }
    return APPLIED;
  }

  /**
   * Touches the home slots of the chain's entries (integer hashes) before the blocks are
   * stored one by one: independent loads, so the CPU overlaps their cache misses instead
   * of taking them one block at a time (the (worker, hash) table is tens of MB at a few
   * million worker-blocks). Only a cache effect: nothing is read from the result.
   * (Warming the nodes' slots and holder lists as well measured no better: the node
   * table is ten times smaller and mostly cached.)
   */
  #warm(w: number, c: Chain, n: number): void {
    if (c.hashes !== null) return;
    const entries = this.#entries;
    const words = c.words;
    const wk = w << 1; // integer hashes are kind 0
    let sink = 0;
    for (let i = c.first, end = c.first + n; i < end; i++) {
      sink ^= entries.warm(wk, words[2 * i]! | 0, words[2 * i + 1]! | 0);
    }
    this.#sink[0] = sink;
  }

  /**
   * `#warm` for the integer hashes `[first, end)` of a removal (or a tier change): their
   * entries' slots, then records, then the nodes they point at.
   */
  #warmEntries(w: number, words: HashWords, first: number, end: number): void {
    const entries = this.#entries;
    const nodes = this.#nodes;
    const wk = w << 1;
    let sink = 0;
    for (let i = first; i < end; i++)
      sink ^= entries.warm(wk, words[2 * i]! | 0, words[2 * i + 1]! | 0);
    for (let i = first; i < end; i++) {
      sink ^= nodes.warmNode(entries.warmRecord(wk, words[2 * i]! | 0, words[2 * i + 1]! | 0));
    }
    this.#sink[0] = sink;
  }

  /**
   * Loads hash `i` of the source into the key parser (`hashes[i]`, or the integer at
   * pair `i` of `words`). False when a string hash was never interned and `intern` is off.
   */
  #setKey(src: HashSource, i: number, intern: boolean): boolean {
    if (src.hashes !== null) return this.#hashes.parse(src.hashes[i]!, intern);
    this.#hashes.setInt(src.words[2 * i]! | 0, src.words[2 * i + 1]! | 0);
    return true;
  }

  /** Worker `w` holds `node` in tier `bit` under the key just loaded by `#setKey`. */
  #register(w: number, node: number, bit: number): void {
    const hk = this.#hashes;
    const wk = (w << 1) | hk.kind;
    const entries = this.#entries;
    const e = entries.find(wk, hk.hi, hk.lo);
    if (e < 0) {
      // The holding first, then its entry, so that a pool found full (a RangeError, which
      // clears the worker) leaves no entry without its holding nor holding without entry.
      this.#holdings.attach(node, w, bit);
      try {
        entries.insert(wk, hk.hi, hk.lo, node, bit);
      } catch (err) {
        this.#holdings.change(node, w, bit, 0);
        throw err;
      }
      if (hk.kind !== 0) hk.retain(hk.lo);
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
        const ck = e * 8 + bit;
        this.#copies.set(ck, (this.#copies.get(ck) ?? 0) + 1);
      }
      entries.touch(e);
      return;
    }
    // The engine reused the hash for another block (e.g. re-stored under a new parent
    // after an eviction we did not see): an engine hash names one block at a time, so the
    // old placement is stale. Move the entry; the new placement has only this tier.
    // The engine may still hold the old block under this hash (unchained hashes): a
    // later event naming the hash as its parent cannot say which block it means.
    this.#holdings.attach(node, w, bit); // first: it alone can find a pool full
    this.#markReused(w);
    if (this.#copies.size > 0) this.#dropCopies(e);
    entries.touch(e);
    entries.setNode(e, node);
    entries.setMeta(e, (meta & ~TIER_BITS) | bit);
    this.#holdings.change(old, w, mask, 0);
    this.#prune(old);
  }

  /**
   * Adds (`add`) or removes tier `bit` for blocks already known by hash. Unknown hashes
   * (or, on removal, hashes not held in that tier) are counted; the rest are applied.
   */
  #retier(w: number, src: HashSource, bit: number, add: boolean): ApplyResult {
    const entries = this.#entries;
    const end = src.first + src.count;
    if (src.hashes === null && src.count > 1) this.#warmEntries(w, src.words, src.first, end);
    let unknown = 0;
    for (let i = src.first; i < end; i++) {
      const e = this.#setKey(src, i, false) ? this.#findKey(w) : -1;
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
        if (this.#copies.size > 0 && this.#dropCopy(e, bit)) continue;
        if (bit === GPU && this.#gpuRemoved !== null) {
          const nodes = this.#nodes;
          this.#gpuRemoved(this.slotKey(w), nodes.keyHi(node) >>> 0, nodes.keyLo(node) >>> 0);
        }
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

  /** Worker `w` used the hash loaded in the parser for two blocks (see `#reused`). */
  #markReused(w: number): void {
    const hk = this.#hashes;
    let marks = this.#reused.get(w);
    if (marks === undefined) {
      marks = new Map();
      this.#reused.set(w, marks);
    }
    const k = `${hk.kind}:${hk.hi}:${hk.lo}`;
    if (marks.has(k)) return;
    // An interned id is kept while marked, so that it is never reused for another hash.
    if (hk.kind !== 0) hk.retain(hk.lo);
    marks.set(k, hk.kind !== 0 ? hk.lo : -1);
  }

  /** Whether worker `w` used the hash loaded in the parser for two blocks. */
  #isReused(w: number): boolean {
    const marks = this.#reused.get(w);
    if (marks === undefined) return false;
    const hk = this.#hashes;
    return marks.has(`${hk.kind}:${hk.hi}:${hk.lo}`);
  }

  /** Slot `w` is cleared: its engine's cache is empty, no hash of it names two blocks. */
  #forgetReused(w: number): void {
    const marks = this.#reused.get(w);
    if (marks === undefined) return;
    for (const id of marks.values()) if (id >= 0) this.#hashes.release(id);
    this.#reused.delete(w);
  }

  /** Removes one extra copy of (entry, tier) if there is one. */
  #dropCopy(e: number, bit: number): boolean {
    const ck = e * 8 + bit;
    const n = this.#copies.get(ck);
    if (n === undefined) return false;
    if (n > 1) this.#copies.set(ck, n - 1);
    else this.#copies.delete(ck);
    return true;
  }

  #dropCopies(e: number): void {
    this.#copies.delete(e * 8 + GPU);
    this.#copies.delete(e * 8 + HOST);
    this.#copies.delete(e * 8 + DISK);
  }

  /**
   * O(1) clear of slot `w`: its key leaves it (the next event of that worker gets a fresh
   * slot), `findMatches` never credits it again (its disk run can never equal a block
   * index), and `reclaim` frees its entries later.
   */
  #retire(w: number): void {
    const slots = this.#workers;
    slots.retire(w);
    slots.diskRun[w] = -1;
    if (this.#reused.size > 0) this.#forgetReused(w);
    this.#lastWorker = null;
    if (slots.blocks[w] === 0) {
      slots.recycle(w);
      return;
    }
    this.#retired[w] = 1;
    this.#zombies.push(w);
  }

  /** Retired slot `w` holds nothing any more: it can be reused. */
  #finish(w: number): void {
    this.#retired[w] = 0;
    const zombies = this.#zombies;
    zombies.splice(zombies.indexOf(w), 1);
    this.#workers.recycle(w);
  }

  /** Entry `e` (of slot `w`, with `meta`) goes with all its tiers; returns nodes freed. */
  #drop(e: number, w: number, meta: number): number {
    const node = this.#entries.node(e);
    this.#holdings.change(node, w, meta & TIER_BITS, 0);
    this.#dropEntry(e);
    return this.#prune(node);
  }

  /**
   * After an event of `worker`: a worker holding more GPU entries than its engine has
   * blocks is reset; past the global cap the least recently stored entries go.
   */
  #bound(worker: WorkerKey): void {
    const slots = this.#workers;
    const w = this.#slot(worker);
    const cap = slots.gpuCap[w]!;
    if (cap > 0 && slots.gpuEntries[w]! > cap) {
      this.#overflowResets++;
      // Lost removals, not an empty engine: its reused hashes stay ambiguous.
      const marks = this.#reused.get(w);
      this.#reused.delete(w);
      this.#retire(w);
      const fresh = this.#slot(worker);
      if (marks !== undefined) this.#reused.set(fresh, marks);
    }
    const max = this.#maxBlocks;
    if (max === 0) return;
    const entries = this.#entries;
    while (entries.live > max) {
      const e = entries.oldest;
      const meta = entries.meta(e);
      const victim = meta >>> 4;
      this.#drop(e, victim, meta);
      if (this.#retired[victim] === 0) this.#capEvictions++;
      else if (slots.blocks[victim] === 0) this.#finish(victim);
    }
  }

  /** Entry of worker `w`'s engine hash, or −1. */
  #lookup(w: number, hash: EngineBlockHash): number {
    if (!this.#hashes.parse(hash, false)) return -1;
    return this.#findKey(w);
  }

  /** Entry of worker `w`'s integer hash at pair `i` of `words`, or −1. */
  #lookupWords(w: number, words: HashWords, i: number): number {
    this.#hashes.setInt(words[2 * i]! | 0, words[2 * i + 1]! | 0);
    return this.#findKey(w);
  }

  /** Entry of worker `w` under the key loaded in the parser, or −1. */
  #findKey(w: number): number {
    const hk = this.#hashes;
    return this.#entries.find((w << 1) | hk.kind, hk.hi, hk.lo);
  }

  #dropEntry(e: number): void {
    const entries = this.#entries;
    if (this.#copies.size > 0) this.#dropCopies(e);
    if ((entries.meta(e) >>> 3) & 1) this.#hashes.release(entries.lo(e));
    entries.remove(e);
  }

  /** Frees `node` and then its ancestors while they have neither holders nor children. */
  #prune(node: number): number {
    const nodes = this.#nodes;
    let freed = 0;
    for (; node >= 0 && nodes.isUnused(node); freed++) node = nodes.free(node);
    return freed;
  }

  /** The capture around copied node and entry records (the rest is small: taken now). */
  #captured(nodes: Uint32Array, entries: Uint32Array): IndexCapture {
    const keys = this.#workers.keysBySlot();
    for (const z of this.#zombies) keys[z] = undefined;
    // Strings by id as of the copy: the encoder reads them over many turns, while events
    // free ids and reuse them for other hashes.
    const strings = this.#hashes.copyStrings();
    return {
      blockSize: this.blockSize,
      nodes,
      entries,
      oldest: this.#entries.oldest,
      workers: keys,
      strings: (id) => strings[id],
      copies: new Map(this.#copies),
    };
  }

  /** Copy and rebuild, for `snapshot-codec.ts` only (see snapshot-access.ts). */
  snapshotAccess(): SnapshotAccess {
    // Copies go into buffers kept between captures (one capture is encoded at a time).
    let nodeBuf: Uint32Array | undefined;
    let entryBuf: Uint32Array | undefined;
    return {
      capture: () => {
        nodeBuf = this.#nodes.copyRecords(nodeBuf);
        entryBuf = this.#entries.copyRecords(entryBuf);
        return this.#captured(nodeBuf, entryBuf);
      },
      beginCapture: () => {
        const version = this.#version;
        const from = [this.#nodes.recordsView(), this.#entries.recordsView()] as const;
        nodeBuf = bufferFor(from[0].length, nodeBuf);
        entryBuf = bufferFor(from[1].length, entryBuf);
        const to = [nodeBuf, entryBuf] as const;
        let part = 0;
        let at = 0;
        return {
          step: (words) => {
            // Changed since: the copy is spoiled (`finish` says so): stop copying.
            if (this.#version !== version) return false;
            while (part < 2 && words > 0) {
              const src = from[part]!;
              const n = Math.min(words, src.length - at);
              to[part]!.set(src.subarray(at, at + n), at);
              at += n;
              words -= n;
              if (at === src.length) {
                part++;
                at = 0;
              }
            }
            return part < 2;
          },
          finish: () =>
            part < 2 || this.#version !== version
              ? null
              : this.#captured(
                  to[0].subarray(0, from[0].length),
                  to[1].subarray(0, from[1].length),
                ),
        };
      },
      prepare: () => {
        nodeBuf = this.#nodes.copyBuffer(nodeBuf);
        entryBuf = this.#entries.copyBuffer(entryBuf);
        return [nodeBuf, entryBuf];
      },
      restoreNode: (hi, lo, parent) => {
        this.#version++;
        const n = this.#nodes.find(hi, lo);
        return n >= 0 ? n : this.#nodes.create(hi, lo, parent);
      },
      restoreEntry: (worker, node, mask, hi, lo, str, copies) => {
        this.#version++;
        const w = this.#slot(worker);
        if (str === null) this.#hashes.setInt(hi, lo);
        else this.#hashes.parse(str as EngineBlockHash, true);
        this.#register(w, node, mask);
        if (copies !== null) {
          const e = this.#findKey(w);
          for (let t = 0; t < 3; t++)
            if (copies[t]! > 0) this.#copies.set(e * 8 + (1 << t), copies[t]!);
        }
        this.#bound(worker);
      },
    };
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
