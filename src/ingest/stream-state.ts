/**
 * Per-stream counters of one KV event subscriber (one worker, one data-parallel rank).
 * Each subscriber owns its `StreamCounters` (no globals); the telemetry layer reads a
 * `StreamState` snapshot on scrape and turns it into metrics.
 */

import { OutcomeCounter } from "../index/outcome-counter.js";
import type { ApplyStatus } from "../index/types.js";
import type { SkipCounts } from "../protocol/decode-error.js";
import type { KvEvent } from "../protocol/events.js";
import type { WorkerKey } from "../protocol/worker.js";
import { REPLAY_FAILURE_REASONS, type ReplayFailureReason } from "../transport/replay-client.js";

/**
 * The wire dialect of a stream. vLLM and SGLang share the envelope and tags but their
 * array-form `BlockStored` fields differ after `medium`; knowing the engine avoids
 * guessing (the codec's "auto" order) on ambiguous 7-field events.
 */
export type StreamFormat = "vllm" | "sglang" | "mooncake";

/**
 * Why a worker's index entries were dropped:
 * - `restart`: the sequence went backwards (the engine restarted);
 * - `unfilled_gap`: batches were lost and replay could not bring them back;
 * - `startup_hole`: on first contact the engine no longer had its oldest batches (the
 *   worker held nothing from this stream yet, so this is expected after a router
 *   restart, not a loss of known state);
 * - `replay_failed`: replays kept stopping early (timeout, socket, malformed) without
 *   progress until the attempts ran out: what the worker holds may be stale;
 * - `replay_mismatch`: a live batch had other bytes than the replayed batch of the same
 *   seq: the replay endpoint serves another stream (misconfigured), what replays applied
 *   is not this worker's. The replay endpoint is not used again by this stream.
 */
export type ResetReason =
  | "restart"
  | "unfilled_gap"
  | "startup_hole"
  | "replay_failed"
  | "replay_mismatch";

export const RESET_REASONS: readonly ResetReason[] = [
  "restart",
  "unfilled_gap",
  "startup_hole",
  "replay_failed",
  "replay_mismatch",
];

/** A point-in-time view of one stream (plain data; `lastSeq` is a bigint, 64-bit unsigned). */
export interface StreamState {
  readonly worker: WorkerKey;
  readonly endpoint: string;
  readonly replayEndpoint: string | null;
  readonly topic: string;
  readonly format: StreamFormat;
  /** The SUB socket currently has a live TCP connection to the publisher. */
  readonly connected: boolean;
  /** A replay is in flight (live batches wait meanwhile). */
  readonly replaying: boolean;
  /**
   * False while the stream is catching up (a replay in flight or waiting to be retried):
   * the index then holds an older prefix of the engine's stream, and matches against
   * this worker are flagged as not current.
   */
  readonly current: boolean;
  /** Sequence number of the last batch received and handled; null before the first. */
  readonly lastSeq: bigint | null;
  /** Wall-clock ms (the injected `now`) when the last batch was handled; null before. */
  readonly lastEventTimeMs: number | null;
  /** Batches handled (live or replayed, decoded or not). */
  readonly batches: number;
  /** Batches received via replay (subset of `batches`). */
  readonly replayedBatches: number;
  /** Live or replayed batches dropped because their seq was already handled. */
  readonly duplicates: number;
  /** Outcome of every applied event: `${event.type}/${status}` → count. */
  readonly events: Readonly<Record<string, number>>;
  readonly skipped: Readonly<SkipCounts>;
  /** Sequence gaps seen on the live stream (first contact not included). */
  readonly gaps: number;
  /** Replay requests sent. */
  readonly replays: number;
  readonly replayFailures: Readonly<Record<ReplayFailureReason, number>>;
  readonly resets: Readonly<Record<ResetReason, number>>;
  /** Undecodable batches by decode error code (skipped; seq still advances). */
  readonly decodeErrors: Readonly<Record<string, number>>;
  /** Messages that were not `[topic, seq(8 bytes), payload]`. */
  readonly malformedFrames: number;
  /** Batches whose `data_parallel_rank` differs from this stream's rank. */
  readonly dpRankMismatches: number;
  /** Batches whose events the index threw on (a bug, never expected; counted, skipped). */
  readonly applyErrors: number;
}

function zeroRecord<K extends string>(keys: readonly K[]): Record<K, number> {
  const out = {} as Record<K, number>;
  for (const k of keys) out[k] = 0;
  return out;
}

/** The mutable counters behind a `StreamState`; owned by exactly one subscriber. */
export class StreamCounters {
  connected = false;
  replaying = false;
  current = true;
  lastSeq: bigint | null = null;
  lastEventTimeMs: number | null = null;
  batches = 0;
  replayedBatches = 0;
  duplicates = 0;
  /** The index's answer to each event this stream applied, by (type, status). */
  readonly #events = new OutcomeCounter();
  /** Stored events not indexed: extra keys the router cannot reproduce (`extra-keys.ts`). */
  #opaqueExtraKeys = 0;
  readonly skipped: SkipCounts = { unknownTag: 0, nonMainGroup: 0, unknownKeys: 0 };
  gaps = 0;
  replays = 0;
  readonly replayFailures = zeroRecord(REPLAY_FAILURE_REASONS);
  readonly resets = zeroRecord(RESET_REASONS);
  readonly decodeErrors = new Map<string, number>();
  malformedFrames = 0;
  dpRankMismatches = 0;
  applyErrors = 0;

  /** Count the index's answer to one applied event (hot path: one increment). */
  countEvent(type: KvEvent["type"], status: ApplyStatus): void {
    this.#events.count(type, status);
  }

  /** Count a stored event left out of the index because of its extra keys. */
  countOpaqueExtraKeys(): void {
    this.#opaqueExtraKeys++;
  }

  /** Event outcomes as `${type}/${status}` → count (only outcomes that occurred). */
  eventCounts(): Record<string, number> {
    const out = this.#events.toRecord();
    if (this.#opaqueExtraKeys > 0) out["stored/opaque_extra_keys"] = this.#opaqueExtraKeys;
    return out;
  }

  countDecodeError(code: string): void {
    this.decodeErrors.set(code, (this.decodeErrors.get(code) ?? 0) + 1);
  }

  /** A copy that later updates do not change. */
  snapshot(ident: {
    worker: WorkerKey;
    endpoint: string;
    replayEndpoint: string | null;
    topic: string;
    format: StreamFormat;
  }): StreamState {
    return {
      ...ident,
      connected: this.connected,
      replaying: this.replaying,
      current: this.current,
      lastSeq: this.lastSeq,
      lastEventTimeMs: this.lastEventTimeMs,
      batches: this.batches,
      replayedBatches: this.replayedBatches,
      duplicates: this.duplicates,
      events: this.eventCounts(),
      skipped: { ...this.skipped },
      gaps: this.gaps,
      replays: this.replays,
      replayFailures: { ...this.replayFailures },
      resets: { ...this.resets },
      decodeErrors: Object.fromEntries(this.decodeErrors),
      malformedFrames: this.malformedFrames,
      dpRankMismatches: this.dpRankMismatches,
      applyErrors: this.applyErrors,
    };
  }
}
