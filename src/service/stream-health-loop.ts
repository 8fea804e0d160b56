/**
 * The degraded-mode switch on the service's event loop (docs/prediction.md): every
 * `intervalMs` it reads the event streams' states, asks `StreamHealth` whether each is
 * broken (unfilled gap, silent while served, decode errors), and puts the worker's
 * `PredictedBlocks` entries in degraded mode (approximate view, capped at the worker's
 * KV capacity) or back to precise (approximate entries dropped). It also drops the
 * predictions of a worker that left the registry or whose engine restarted or cleared
 * its cache. Logs each switch; `degraded()` feeds `/v1/workers` and the metrics.
 */

import type { StreamState } from "../ingest/stream-state.js";
import type { LoadTracker } from "../load/load-tracker.js";
import type { WorkerRegistry } from "../load/worker-registry.js";
import type { PredictedBlocks } from "../predict/predicted-blocks.js";
import {
  type DegradedReason,
  StreamHealth,
  type StreamHealthOptions,
} from "../predict/stream-health.js";
import type { WorkerKey } from "../protocol/worker.js";
import type { LogSink } from "../util/log-sink.js";

export interface StreamHealthLoopOptions {
  readonly predicted: PredictedBlocks;
  readonly streams: () => readonly StreamState[];
  readonly registry: WorkerRegistry;
  readonly loads: LoadTracker;
  readonly nowMs: () => number;
  readonly logger: LogSink;
  /** Switch broken streams to degraded mode (false: only drop stale predictions). */
  readonly fallback: boolean;
  readonly health?: Partial<StreamHealthOptions>;
  /** Degraded cap when a worker's KV capacity is unknown. */
  readonly defaultCapacityBlocks: number;
  readonly intervalMs?: number;
}

/** The stream's counters as `StreamHealth` reads them. */
function observation(s: StreamState) {
  const ev = s.events;
  let decodeErrors = 0;
  for (const n of Object.values(s.decodeErrors)) decodeErrors += n;
  return {
    worker: s.worker,
    lossResets: s.resets.unfilled_gap + s.resets.replay_failed + s.resets.replay_mismatch,
    decodeErrors,
    lastEventTimeMs: s.lastEventTimeMs,
    storedApplied: ev["stored/applied"] ?? 0,
    storedParentMissing: ev["stored/parent_not_found"] ?? 0,
  };
}

export class StreamHealthLoop {
  readonly #o: StreamHealthLoopOptions;
  readonly #health: StreamHealth;
  /** Per stream: restarts + applied clears seen (an empty engine cache drops predictions). */
  readonly #wipes = new Map<WorkerKey, number>();
  #timer: NodeJS.Timeout | null = null;

  constructor(o: StreamHealthLoopOptions) {
    this.#o = o;
    this.#health = new StreamHealth(o.health);
  }

  start(): void {
    if (this.#timer !== null) return;
    this.#timer = setInterval(() => this.tick(), this.#o.intervalMs ?? 1000);
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#timer = null;
  }

  /** Workers in degraded mode now, with the reason and since when. */
  degraded(): Map<WorkerKey, { reason: DegradedReason; sinceMs: number }> {
    const out = new Map<WorkerKey, { reason: DegradedReason; sinceMs: number }>();
    for (const [w, reason] of this.#health.degraded()) {
      out.set(w, { reason, sinceMs: this.#health.degradedSinceMs(w) ?? 0 });
    }
    return out;
  }

  /** Times any worker entered degraded mode. */
  get transitions(): number {
    return this.#health.transitions;
  }

  tick(): void {
    const o = this.#o;
    const p = o.predicted;
    const nowMs = o.nowMs();
    const seen = new Set<WorkerKey>();
    for (const s of o.streams()) {
      const key = s.worker;
      seen.add(key);
      const wipes = s.resets.restart + (s.events["cleared/applied"] ?? 0);
      const before = this.#wipes.get(key);
      this.#wipes.set(key, wipes);
      // Degraded or not: an empty engine cache holds nothing the router sent before.
      if (before !== undefined && wipes > before) p.clearWorker(key);
      if (!o.fallback) continue;
      const v = this.#health.observe(observation(s), p.routed(key), nowMs);
      if (!v.changed) continue;
      if (v.reason !== null) {
        const cap = this.#capacity(key);
        p.setDegraded(key, cap);
        o.logger.warn(
          { worker: key, reason: v.reason, capacityBlocks: cap },
          "kv event stream broken: routing this worker by its routed requests (degraded)",
        );
      } else {
        p.setHealthy(key);
        o.logger.info({ worker: key }, "kv event stream healthy again: precise routing resumes");
      }
    }
    for (const key of p.workers()) {
      if (seen.has(key) || o.registry.get(key) !== undefined) continue;
      this.forget(key);
    }
    p.expire(nowMs);
  }

  /**
   * `key` was removed from the fleet: its predictions, degraded state and stream history
   * go now (the tick would only notice if it were still gone at the next tick; a worker
   * added again under the same id is a new engine).
   */
  forget(key: WorkerKey): void {
    this.#o.predicted.removeWorker(key);
    this.#health.forget(key);
    this.#wipes.delete(key);
  }

  #capacity(key: WorkerKey): number {
    const o = this.#o;
    return (
      o.registry.get(key)?.numGpuBlocks ??
      o.loads.snapshot(key)?.numGpuBlocks ??
      o.defaultCapacityBlocks
    );
  }
}
