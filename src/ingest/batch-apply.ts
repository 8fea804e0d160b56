/**
 * Decode (unless the decode thread already did) and apply one batch of a stream to the
 * prefix index, synchronously, counting every outcome in the stream's counters. The
 * sequencer decides *whether* a batch is applied; this file is *how*.
 */

import type { PrefixIndex } from "../index/types.js";
import { tapeEventType } from "../protocol/event-tape.js";
import type { EventBatch, KvEvent } from "../protocol/events.js";
import type { WorkerKey } from "../protocol/worker.js";
import type { LogSink } from "../util/log-sink.js";
import type { BatchDecodeResult, StreamDecoder } from "./batch-decoder.js";
import type { DecodeReply } from "./decode-thread.js";
import { keyableStored } from "./extra-keys.js";
import type { StreamCounters } from "./stream-state.js";
import { applyTapeEvent } from "./tape-apply.js";

export interface ApplyTarget {
  readonly worker: WorkerKey;
  readonly dpRank: number;
  readonly index: PrefixIndex;
  readonly decoder: StreamDecoder;
  readonly counters: StreamCounters;
  /** Rate-limited problem log of the stream. */
  readonly problem: (detail: Record<string, unknown>, msg: string) => void;
}

/** Apply one batch; an undecodable one is counted and skipped (its seq still counts). */
export function applyBatch(
  t: ApplyTarget,
  seq: bigint,
  payload: Uint8Array,
  decoded: DecodeReply | null,
): void {
  const c = t.counters;
  const result: BatchDecodeResult | DecodeReply = decoded ?? t.decoder.decode(payload);
  if (!result.ok) {
    c.countDecodeError(result.error.code);
    t.problem(
      { seq: String(seq), code: result.error.code, error: result.error.message },
      "kv events batch undecodable, skipped",
    );
    return;
  }
  const { skipped } = result;
  const tape = "tape" in result ? result.tape : null;
  const batch = tape === null ? (result as { batch: EventBatch }).batch : null;
  const dpRank = tape !== null ? tape.dpRank : batch!.dpRank;
  c.skipped.unknownTag += skipped.unknownTag;
  c.skipped.nonMainGroup += skipped.nonMainGroup;
  c.skipped.unknownKeys += skipped.unknownKeys;
  if (dpRank !== null && dpRank !== t.dpRank) {
    c.dpRankMismatches++;
    t.problem(
      { seq: String(seq), batchRank: dpRank, expectedRank: t.dpRank },
      "kv events batch from another data-parallel rank (endpoint misconfigured?)",
    );
  }
  const { worker, index } = t;
  try {
    if (tape !== null) {
      for (let i = 0; i < tape.events; i++) {
        c.countEvent(tapeEventType(tape, i), applyTapeEvent(index, worker, tape, i).status);
      }
    } else {
      for (const event of batch!.events) {
        const keyable = event.type === "stored" ? keyableStored(event) : event;
        if (keyable === null) c.countOpaqueExtraKeys();
        else c.countEvent(event.type, index.applyEvent(worker, keyable).status);
      }
    }
  } catch (err) {
    c.applyErrors++;
    // The index stopped part-way through this worker's update (a broken invariant, never
    // expected): what it holds for the worker can no longer be trusted, so it is dropped —
    // the worker's blocks come back with its next stored events, none is claimed falsely.
    let cleared = true;
    try {
      index.applyEvent(worker, CLEARED);
    } catch {
      cleared = false;
    }
    // As on every other clear: a stateful decoder (Mooncake's per-key adapter) must forget
    // what it announced, or it would never announce those blocks again.
    t.decoder.reset();
    t.problem(
      { seq: String(seq), err: String(err), cleared },
      cleared
        ? "kv events batch failed to apply; the worker's cached blocks were cleared"
        : "kv events batch failed to apply, and clearing the worker failed too",
    );
  }
}

const CLEARED: KvEvent = { type: "cleared" };

/** Log at most this many problems per stream, then one in `LOG_EVERY`. */
const LOG_FIRST = 10;
const LOG_EVERY = 1000;

/** A stream's problem log: warnings with worker and occurrence number, rate-limited. */
export function problemLog(
  log: LogSink,
  worker: WorkerKey,
): (detail: Record<string, unknown>, msg: string) => void {
  let n = 0;
  return (detail, msg) => {
    n++;
    if (n <= LOG_FIRST || n % LOG_EVERY === 0) log.warn({ worker, occurrence: n, ...detail }, msg);
  };
}
