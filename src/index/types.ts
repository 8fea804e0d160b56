/**
 * The prefix index's contract. `radix-tree.ts` implements it; the router, the
 * subscribers and the trace replay tool only see this interface.
 */

import type { KvEvent, Tier } from "../protocol/events.js";
import type { WorkerKey } from "../protocol/worker.js";

declare const blockKeySeqBrand: unique symbol;

/**
 * A sequence of the router's own chained block keys (64-bit each), stored without
 * BigInt as interleaved 32-bit halves: `[hi0, lo0, hi1, lo1, …]`. Never an engine hash.
 */
export type BlockKeySeq = Uint32Array & { readonly [blockKeySeqBrand]: true };

declare const hashWordsBrand: unique symbol;
declare const tokenWordsBrand: unique symbol;

/**
 * Engine block hashes that are 64-bit integers, as `(hi, lo)` word pairs: hash `i` is
 * `[2i, 2i + 1]`. Branded apart from `TokenWords` (both are plain `Uint32Array`s).
 */
export type HashWords = Uint32Array & { readonly [hashWordsBrand]: true };

/** Token ids of stored blocks, one per word. Never hashes. */
export type TokenWords = Uint32Array & { readonly [tokenWordsBrand]: true };

/** The hashes `[first, first + count)` of a `HashWords` array, all in one tier. */
export interface RemovedWords {
  readonly hashes: HashWords;
  readonly first: number;
  readonly count: number;
  readonly tier: Tier;
}

/**
 * A stored event whose hashes are words (a view on an event tape, see
 * protocol/event-tape.ts); the same fields as `BlockStoredEvent`. Callers may reuse one
 * object for many calls: the index reads it during the call only.
 */
export interface StoredWords extends RemovedWords {
  /** The parent's pair in `hashes`; −1 = the chain starts at a root. */
  readonly parentPair: number;
  /** The blocks' tokens: `tokens[tokenOffset, tokenOffset + tokenCount)`. */
  readonly tokens: TokenWords;
  readonly tokenOffset: number;
  readonly tokenCount: number;
  readonly blockSize: number;
  readonly loraName: string | null;
  readonly loraId: number | null;
}

/** Outcome of applying one event; every outcome is counted by the index. */
export type ApplyStatus =
  | "applied"
  /** stored: `parentHash` is not a block this worker is known to hold. */
  | "parent_not_found"
  /**
   * stored: `parentHash` is an engine hash this worker was seen using for two different
   * blocks (unchained engine hashes), so which block it names is unknown.
   */
  | "parent_ambiguous"
  /** removed / token-less stored: an engine hash this worker is not known to hold. */
  | "block_not_found"
  /** stored: the event's block size differs from the index's. */
  | "block_size_mismatch"
  /** stored: `tokenIds.length !== blockHashes.length × blockSize`. */
  | "invalid_token_count";

export interface ApplyResult {
  readonly status: ApplyStatus;
  /** removed: hashes that were unknown (the others were still applied). */
  readonly unknownHashes: number;
}

/** How far one worker holds a prompt's prefix. All counts are in blocks. */
export interface WorkerMatch {
  readonly worker: WorkerKey;
  /** Leading blocks held contiguously from the root in GPU memory. */
  readonly gpu: number;
  /** Leading blocks held contiguously in GPU or host memory (≥ gpu). */
  readonly host: number;
  /** Leading blocks held contiguously in any tier (≥ host). */
  readonly disk: number;
  /** All blocks this worker holds in the index, any prompt, any tier. */
  readonly totalBlocks: number;
}

export interface MatchResult {
  /** Number of keys that were looked up. */
  readonly blocks: number;
  /**
   * One entry per worker holding at least the prompt's first block (`disk` ≥ 1), in
   * worker-key order. A worker that is absent matches nothing (read it as all zeros):
   * the answer's size follows the prompt's holders, not the fleet.
   */
  readonly workers: readonly WorkerMatch[];
}

export interface IndexStats {
  readonly nodes: number;
  readonly workers: number;
  /** Sum over workers of blocks held (a block held by 3 workers counts 3). */
  readonly workerBlocks: number;
  /** Outcome counters: `${event.type}/${status}` → count. */
  readonly outcomes: Readonly<Record<string, number>>;
  /** Blocks of cleared workers whose memory is not reclaimed yet (never matched). */
  readonly reclaimPendingBlocks: number;
  /** Entries evicted, least recently stored first, because the index was at its cap. */
  readonly capEvictions: number;
  /** Workers reset for holding more GPU blocks than their engine has (lost removals). */
  readonly overflowResets: number;
}

export interface PrefixIndex {
  readonly blockSize: number;
  /** Apply one event of one worker, synchronously and in stream order. */
  applyEvent(worker: WorkerKey, event: KvEvent): ApplyResult;
  /** Forget every block of a worker (stream reset, unknown state, removal). */
  removeWorker(worker: WorkerKey): void;
  /** Leading-block overlap of `keys` per tier, for the workers that hold any of it. */
  findMatches(keys: BlockKeySeq): MatchResult;
  stats(): IndexStats;
}

/**
 * Entry points for events whose hashes are 64-bit integers given as words (the threaded
 * ingest path): the same rules and outcomes as `PrefixIndex.applyEvent` with the hashes'
 * hex form, without a string per hash.
 */
export interface WordsIndex {
  applyStoredWords(worker: WorkerKey, event: StoredWords): ApplyResult;
  applyRemovedWords(worker: WorkerKey, event: RemovedWords): ApplyResult;
}

/**
 * The upkeep a bounded index needs from its host's event loop (the core does no I/O and
 * keeps no timers): reclaiming cleared workers' memory in slices, and learning each
 * worker's capacity. `RadixTreeIndex` implements it.
 */
export interface IndexUpkeep {
  /** True while cleared workers' memory waits for `reclaim`. */
  readonly reclaimPending: boolean;
  /** Does a bounded slice of reclamation; returns whether work remains. */
  reclaim(budget?: number): boolean;
  /** GPU blocks the worker's engine has (null = unknown); more held = lost removals. */
  setWorkerCapacity(worker: WorkerKey, gpuBlocks: number | null): void;
}

export type { Tier };
