/**
 * A second source of predicted (routed, not yet finished) load that the router adds to
 * its own in-flight records: the requests other router replicas sent to a worker
 * (`src/replicas/`). It answers in the same shape as `InFlightTracker.totals` /
 * `totalsSince`, so the combining rule (`effective-load.ts`) treats both alike: what was
 * routed after a snapshot is added to it, pending prefill always comes from predictions.
 */

import type { WorkerKey } from "../protocol/worker.js";
import type { InFlightTotals } from "./types.js";

export interface PredictedLoadSource {
  /** Every request this source knows in flight on `worker`. */
  totals(worker: WorkerKey): InFlightTotals;
  /** Those routed at or after `sinceMs` (wall clock, ms; `InFlightTracker.totalsSince`). */
  totalsSince(worker: WorkerKey, sinceMs: number): InFlightTotals;
  /**
   * Of its pending prefill on `worker`, the tokens of requests whose prompt shares the
   * first `blocks` blocks of `keys` (`InFlightTracker.pendingSharing`). A source without
   * it counts its requests as sharing nothing.
   */
  pendingSharing?(worker: WorkerKey, keys: Uint32Array, blocks: number): number;
  /**
   * From now on, add to `changed` every worker whose figures here change (the column
   * scorer's cache, `router-columns.ts`). A source without it is read anew every decision.
   */
  watch?(changed: Set<WorkerKey>): void;
}

/** a + b, field by field (a fresh object; neither input is kept). */
export function addTotals(a: InFlightTotals, b: InFlightTotals): InFlightTotals {
  if (b.activeRequests === 0 && b.pendingRequests === 0) return a;
  return {
    pendingPrefillTokens: a.pendingPrefillTokens + b.pendingPrefillTokens,
    pendingRequests: a.pendingRequests + b.pendingRequests,
    activeBlocks: a.activeBlocks + b.activeBlocks,
    activeRequests: a.activeRequests + b.activeRequests,
  };
}
