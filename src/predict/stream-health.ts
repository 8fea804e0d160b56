/**
 * Is a worker's KV event stream trustworthy? Decides, from periodic observations of the
 * stream's counters and of the requests routed to the worker, when to switch the worker
 * to degraded mode (route it by the approximate view of `PredictedBlocks`) and when to
 * switch it back (docs/prediction.md). Pure: the caller polls and passes time in.
 *
 * Degraded when, since the last observation:
 * - `unfilled_gap`: the stream lost batches it could not replay (an `unfilled_gap`,
 *   `replay_failed` or `replay_mismatch` reset): the index was cleared, but the engine
 *   still holds its hot prefixes and will never announce them again;
 * - `silent`: at least `minRoutedWhileSilent` requests were routed to the worker and no
 *   event batch arrived for `silentAfterMs` after the first of them;
 * - `decode_errors`: `decodeErrorsToDegrade` undecodable batches within `silentAfterMs`.
 * Healthy again once no such sign was seen for `recoverAfterMs` and the stored events
 * since the last sign mostly applied: at most `maxParentMissRatio` of them were rejected
 * as `parent_not_found` (after a gap, the engine extends prefixes the index lost), with
 * at least one stored event applied after a gap (no evidence, no recovery).
 */

import type { WorkerKey } from "../protocol/worker.js";

export type DegradedReason = "unfilled_gap" | "silent" | "decode_errors";
export const DEGRADED_REASONS: readonly DegradedReason[] = [
  "unfilled_gap",
  "silent",
  "decode_errors",
];

/** What the health check reads of one stream (the service adapts `StreamState`). */
export interface StreamObservation {
  readonly worker: WorkerKey;
  /** `unfilled_gap` + `replay_failed` + `replay_mismatch` resets so far. */
  readonly lossResets: number;
  /** Undecodable batches so far. */
  readonly decodeErrors: number;
  /** When the last batch was handled (null before the first). */
  readonly lastEventTimeMs: number | null;
  /** Stored events applied so far. */
  readonly storedApplied: number;
  /** Stored events rejected as `parent_not_found` so far. */
  readonly storedParentMissing: number;
}

export interface StreamHealthOptions {
  readonly silentAfterMs: number;
  readonly minRoutedWhileSilent: number;
  readonly decodeErrorsToDegrade: number;
  readonly recoverAfterMs: number;
  readonly maxParentMissRatio: number;
}

export const STREAM_HEALTH_DEFAULTS: StreamHealthOptions = {
  silentAfterMs: 30_000,
  minRoutedWhileSilent: 3,
  decodeErrorsToDegrade: 3,
  recoverAfterMs: 30_000,
  maxParentMissRatio: 0.1,
};

interface WorkerHealth {
  prev: StreamObservation;
  reason: DegradedReason | null;
  lastBadMs: number;
  /** Routed count when the last batch arrived (or at first sight). */
  routedAtEvent: number;
  /** When requests were first seen routed after the last batch; null if none since. */
  unansweredSinceMs: number | null;
  decodeErrorTimes: number[];
  /** Stored outcomes at the last bad sign (the recovery window's baseline). */
  appliedAtBad: number;
  missingAtBad: number;
  /** When degraded mode began (for the `since` in views). */
  sinceMs: number;
}

export interface HealthVerdict {
  readonly reason: DegradedReason | null;
  /** The verdict changed with this observation. */
  readonly changed: boolean;
}

export class StreamHealth {
  readonly #o: StreamHealthOptions;
  readonly #workers = new Map<WorkerKey, WorkerHealth>();
  #transitions = 0;

  constructor(o: Partial<StreamHealthOptions> = {}) {
    this.#o = { ...STREAM_HEALTH_DEFAULTS, ...o };
  }

  /** Degraded-mode entries so far (monotone). */
  get transitions(): number {
    return this.#transitions;
  }

  /** Take in one observation of `obs.worker`'s stream; `routed` is its monotone route count. */
  observe(obs: StreamObservation, routed: number, nowMs: number): HealthVerdict {
    const o = this.#o;
    const h = this.#workers.get(obs.worker);
    if (h === undefined) {
      this.#workers.set(obs.worker, {
        prev: obs,
        reason: null,
        lastBadMs: Number.NEGATIVE_INFINITY,
        routedAtEvent: routed,
        unansweredSinceMs: null,
        decodeErrorTimes: [],
        appliedAtBad: obs.storedApplied,
        missingAtBad: obs.storedParentMissing,
        sinceMs: nowMs,
      });
      return { reason: null, changed: false };
    }
    const prev = h.prev;
    h.prev = obs;
    let bad: DegradedReason | null = null;
    if (obs.lossResets > prev.lossResets) bad = "unfilled_gap";

    for (let i = prev.decodeErrors; i < obs.decodeErrors && i - prev.decodeErrors < 64; i++) {
      h.decodeErrorTimes.push(nowMs);
    }
    h.decodeErrorTimes = h.decodeErrorTimes.filter((t) => nowMs - t < o.silentAfterMs);
    if (bad === null && h.decodeErrorTimes.length >= o.decodeErrorsToDegrade) bad = "decode_errors";

    if (obs.lastEventTimeMs !== prev.lastEventTimeMs) {
      h.routedAtEvent = routed;
      h.unansweredSinceMs = null;
    } else if (routed > h.routedAtEvent) {
      h.unansweredSinceMs ??= nowMs;
      if (
        bad === null &&
        routed - h.routedAtEvent >= o.minRoutedWhileSilent &&
        nowMs - h.unansweredSinceMs >= o.silentAfterMs
      ) {
        bad = "silent";
      }
    }

    const was = h.reason;
    if (bad !== null) {
      h.lastBadMs = nowMs;
      h.appliedAtBad = obs.storedApplied;
      h.missingAtBad = obs.storedParentMissing;
      // A later, different sign keeps the first reason (the one that started the mode)
      // unless it is the stronger claim of lost state.
      if (h.reason === null) {
        h.reason = bad;
        h.sinceMs = nowMs;
        this.#transitions++;
      } else if (bad === "unfilled_gap") h.reason = bad;
    } else if (h.reason !== null && nowMs - h.lastBadMs >= o.recoverAfterMs) {
      const applied = obs.storedApplied - h.appliedAtBad;
      const missing = obs.storedParentMissing - h.missingAtBad;
      const total = applied + missing;
      const evidence = h.reason !== "unfilled_gap" || applied > 0;
      if (evidence && (total === 0 || missing / total <= o.maxParentMissRatio)) h.reason = null;
      else {
        // Still rejecting: start the next window from here (recent events decide).
        h.appliedAtBad = obs.storedApplied;
        h.missingAtBad = obs.storedParentMissing;
        h.lastBadMs = nowMs;
      }
    }
    return { reason: h.reason, changed: h.reason !== was };
  }

  /** The worker's degraded reason now (null = healthy or unknown). */
  reason(worker: WorkerKey): DegradedReason | null {
    return this.#workers.get(worker)?.reason ?? null;
  }

  /** When the worker's current degraded mode began (null when healthy). */
  degradedSinceMs(worker: WorkerKey): number | null {
    const h = this.#workers.get(worker);
    return h === undefined || h.reason === null ? null : h.sinceMs;
  }

  /** Workers degraded now, with their reasons. */
  degraded(): Map<WorkerKey, DegradedReason> {
    const out = new Map<WorkerKey, DegradedReason>();
    for (const [w, h] of this.#workers) if (h.reason !== null) out.set(w, h.reason);
    return out;
  }

  /** A worker left the fleet: forget it. */
  forget(worker: WorkerKey): void {
    this.#workers.delete(worker);
  }
}
