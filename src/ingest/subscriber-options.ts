/**
 * The options and dependencies of a `KvEventSubscriber` (one engine stream), with their
 * defaults. docs/ingestion.md, "Options", lists the same with reasons.
 */

import type { WorkerKey } from "../protocol/worker.js";
import type { LogSink } from "../util/log-sink.js";
import type { StreamDecoder } from "./batch-decoder.js";
import type { ReplaySlots } from "./replay-slots.js";
import type { StreamFormat } from "./stream-state.js";

export interface KvEventSubscriberOptions {
  /** The (worker, dp rank) this stream feeds; the rank is checked against each batch. */
  readonly worker: WorkerKey;
  /** PUB endpoint to connect to, e.g. `tcp://10.0.0.5:5557`. */
  readonly endpoint: string;
  /** Replay ROUTER endpoint; null when the engine has none (gaps then clear the worker). */
  readonly replayEndpoint: string | null;
  /** SUB prefix filter; "" receives everything. */
  readonly topic: string;
  readonly format: StreamFormat;
  /** Longest silence tolerated from the replay endpoint (one attempt). Default 2000. */
  readonly replayTimeoutMs?: number;
  /** Replays in a row that bring nothing new before the worker is cleared. Default 5. */
  readonly replayMaxAttempts?: number;
  /** Back-off before the n-th retry: replayBackoffMs × 2^(n−1). Default 200 ms. */
  readonly replayBackoffMs?: number;
  /** Cap of that back-off. Default 5000 ms. */
  readonly replayBackoffMaxMs?: number;
  /** ZeroMQ reconnect interval after the engine goes away. Default 100 ms. */
  readonly reconnectIntervalMs?: number;
  /** Cap of ZeroMQ's exponential reconnect back-off. Default 5000 ms. */
  readonly reconnectMaxIntervalMs?: number;
  /** SUB receive high-water mark in messages (0 = unlimited). Default 1,000,000. */
  readonly receiveHighWaterMark?: number;
  /** ZMTP heartbeat interval to detect dead peers, ms (0 = off). Default 10,000. */
  readonly heartbeatIntervalMs?: number;
  /** Decoder override (custom formats); default: a fresh one for `format`. */
  readonly decoder?: StreamDecoder;
  /**
   * Receive and decode live batches on the process's decode thread (decode-thread.ts)
   * while this thread applies earlier ones; replays stay here. Same order, outcomes and
   * counters as without; only for the stateless vLLM/SGLang decoders (ignored for
   * Mooncake or a custom `decoder`). Default false.
   */
  readonly decodeThread?: boolean;
  /**
   * Resume from a router snapshot whose index holds this stream up to batch `lastSeq`
   * (bytes `lastBatch`): the engine is asked for that batch again and compared before
   * replaying on (sequencer.ts `resume`). Ignored without a replay endpoint.
   */
  readonly resume?: { readonly lastSeq: bigint; readonly lastBatch: Uint8Array };
}

export interface KvEventSubscriberDeps {
  readonly logger?: LogSink;
  /** Wall clock in ms, for `lastEventTimeMs`. Default `Date.now`. */
  readonly now?: () => number;
  /** Replay requests across streams wait for a slot here (`SubscriberPool` shares one). */
  readonly replaySlots?: ReplaySlots;
  /** The SUB socket connected (true) or lost its publisher (false): a liveness signal. */
  readonly onConnection?: (worker: WorkerKey, connected: boolean) => void;
}

/** The SUB socket's settings with their defaults (the same on either thread). */
export function subSocketSettings(o: KvEventSubscriberOptions) {
  return {
    receiveHighWaterMark: o.receiveHighWaterMark ?? 1_000_000,
    reconnectInterval: o.reconnectIntervalMs ?? 100,
    reconnectMaxInterval: o.reconnectMaxIntervalMs ?? 5000,
    heartbeatInterval: o.heartbeatIntervalMs ?? 10_000,
  };
}
