/**
 * The JSON view of a worker for `GET /v1/workers`: its declaration, and per data-parallel
 * rank the load the router knows (with staleness), its in-flight requests and the state
 * of its event stream. snake_case, like the rest of the API.
 */

import type { WorkerConfig } from "../config/types.js";
import type { StreamState } from "../ingest/stream-state.js";
import type { InFlightTotals, LoadView } from "../load/types.js";
import type { WorkerKey } from "../protocol/worker.js";

export function workerConfigJson(w: WorkerConfig) {
  return {
    id: w.id,
    url: w.url,
    kind: w.kind,
    model: w.model,
    events_endpoint: w.eventsEndpoint,
    replay_endpoint: w.replayEndpoint,
    topic: w.topic,
    dp_size: w.dpSize,
    metrics_url: w.metricsUrl,
    block_size: w.blockSize,
  };
}

export function loadJson(v: LoadView, nowMs: number) {
  const s = v.snapshot;
  return {
    state: v.state,
    stale: v.stale,
    source: v.source,
    age_ms: v.lastSuccessMs === null ? null : Math.max(0, nowMs - v.lastSuccessMs),
    running: s?.running ?? null,
    waiting: s?.waiting ?? null,
    kv_usage: s?.kvUsage ?? null,
    num_gpu_blocks: s?.numGpuBlocks ?? null,
    last_error: v.lastError,
    consecutive_failures: v.consecutiveFailures,
    total_failures: v.totalFailures,
    total_successes: v.totalSuccesses,
    unreachable: v.unreachable,
  };
}

export function inFlightJson(t: InFlightTotals) {
  return {
    requests: t.activeRequests,
    pending_prefill_requests: t.pendingRequests,
    pending_prefill_tokens: t.pendingPrefillTokens,
    active_blocks: t.activeBlocks,
  };
}

export function streamJson(s: StreamState) {
  const errors = (r: Readonly<Record<string, number>>) =>
    Object.values(r).reduce((a, b) => a + b, 0);
  return {
    endpoint: s.endpoint,
    replay_endpoint: s.replayEndpoint,
    connected: s.connected,
    replaying: s.replaying,
    current: s.current,
    last_seq: s.lastSeq === null ? null : s.lastSeq.toString(),
    last_event_time_ms: s.lastEventTimeMs,
    batches: s.batches,
    replayed_batches: s.replayedBatches,
    duplicates: s.duplicates,
    events: s.events,
    gaps: s.gaps,
    replays: s.replays,
    replay_failures: s.replayFailures,
    resets: s.resets,
    decode_errors: errors(s.decodeErrors),
    malformed_frames: s.malformedFrames,
  };
}

export interface RankSources {
  load(key: WorkerKey): LoadView;
  inFlight(key: WorkerKey): InFlightTotals;
  stream(key: WorkerKey): StreamState | undefined;
  nowMs: number;
}

export function workerJson(w: WorkerConfig, keys: readonly WorkerKey[], src: RankSources) {
  return {
    ...workerConfigJson(w),
    ranks: keys.map((key, rank) => {
      const stream = src.stream(key);
      return {
        rank,
        key,
        load: loadJson(src.load(key), src.nowMs),
        in_flight: inFlightJson(src.inFlight(key)),
        stream: stream === undefined ? null : streamJson(stream),
      };
    }),
  };
}
