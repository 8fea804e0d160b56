/**
 * The combining rule: how a worker's scraped (or pushed) snapshot and the router's own
 * in-flight predictions make one load figure without counting a request twice.
 *
 * A snapshot taken at `atMs` already includes every request the engine had admitted by
 * then, so for the quantities the engine reports (waiting, running, KV blocks) only
 * in-flight requests routed *at or after* `atMs` are added. Pending prefill tokens
 * are not reported by any engine (only request counts are), so they come from the
 * in-flight records, weighed by age and by the engine's figures: a request routed before
 * the snapshot counts only as far as the engine confirms it (its pending prefill is
 * scaled by `(waiting + running) / older pending requests`, at most 1), so requests
 * callers never sent or never reported fade out at the next scrape instead of loading
 * the worker for the whole TTL; requests routed after it count in full while the
 * engine confirmed the older ones, and in the confirmed share when it did not. Only the engine's own KV figure may exclude a worker
 * (`confirmedKvLoad`): a prediction alone never does. Without a usable snapshot (never
 * scraped, or stale) the load is the prediction alone. Details and the known errors of
 * this rule: `docs/load.md`.
 */

import type { WorkerKey } from "../protocol/worker.js";
import type { InFlightTracker } from "./in-flight.js";
import type { PredictedLoadSource } from "./predicted-load-source.js";
import type { EffectiveLoad, InFlightTotals, LoadSnapshot } from "./types.js";

/**
 * Combine a usable snapshot (null = none, or stale) with in-flight totals.
 * `all` = every in-flight request of the worker; `newer` = those routed after
 * `snapshot.atMs` (ignored when there is no snapshot). `configuredCapacity` is the
 * worker's configured GPU blocks, used when the snapshot does not report them.
 */
export function effectiveLoad(
  snapshot: LoadSnapshot | null,
  all: InFlightTotals,
  newer: InFlightTotals,
  configuredCapacity: number | null,
): EffectiveLoad {
  return effectiveLoadInto(emptyLoad(), snapshot, all, newer, configuredCapacity);
}

/** A load to fill with `effectiveLoadInto` (reused across workers by one decision). */
export type MutableLoad = { -readonly [K in keyof EffectiveLoad]-?: EffectiveLoad[K] };

/** A zero load to fill (`effectiveLoadInto`). */
export function emptyLoad(): MutableLoad {
  return {
    pendingPrefillTokens: 0,
    activeBlocks: 0,
    waiting: 0,
    running: 0,
    kvLoad: null,
    confirmedKvLoad: null,
    capacityBlocks: null,
    basis: "predicted",
  };
}

/**
 * `effectiveLoad` written into `out` (every field set) instead of a new object: the one
 * rule, for a decision that reads thousands of workers' loads and keeps only numbers.
 */
export function effectiveLoadInto(
  out: MutableLoad,
  snapshot: LoadSnapshot | null,
  all: InFlightTotals,
  newer: InFlightTotals,
  configuredCapacity: number | null,
): MutableLoad {
  const capacity = positiveOrNull(snapshot?.numGpuBlocks) ?? configuredCapacity;
  if (snapshot === null) {
    out.pendingPrefillTokens = all.pendingPrefillTokens;
    out.activeBlocks = all.activeBlocks;
    out.waiting = all.pendingRequests;
    out.running = all.activeRequests - all.pendingRequests;
    out.kvLoad = capacity === null ? null : all.activeBlocks / capacity;
    out.confirmedKvLoad = null;
    out.capacityBlocks = capacity;
    out.basis = "predicted";
    return out;
  }
  // Requests routed up to the snapshot: the engine had them by then, if they exist. The
  // share it confirms is also how far this worker's newer predictions are trusted: when
  // the last interval's routes never showed up (a client routing without sending), the
  // ones since are probably of the same kind.
  const engineHas = snapshot.waiting + snapshot.running;
  const oldActive = all.activeRequests - newer.activeRequests;
  const trust = oldActive <= engineHas ? 1 : engineHas / oldActive;
  const oldPending = all.pendingRequests - newer.pendingRequests;
  const oldPendingTokens = all.pendingPrefillTokens - newer.pendingPrefillTokens;
  const pendingShare = oldPending <= engineHas ? 1 : engineHas / oldPending;
  // Without a capacity the scraped fraction cannot be turned into blocks: the block
  // count then comes from predictions (older ones as far as the engine confirms them)
  // and the fraction from the scrape.
  const newerBlocks = newer.activeBlocks * trust;
  const activeBlocks =
    capacity === null
      ? (all.activeBlocks - newer.activeBlocks) * trust + newerBlocks
      : snapshot.kvUsage * capacity + newerBlocks;
  out.pendingPrefillTokens = oldPendingTokens * pendingShare + newer.pendingPrefillTokens * trust;
  out.activeBlocks = activeBlocks;
  out.waiting = snapshot.waiting + newer.pendingRequests * trust;
  out.running = snapshot.running + (newer.activeRequests - newer.pendingRequests) * trust;
  out.kvLoad = capacity === null ? snapshot.kvUsage : activeBlocks / capacity;
  out.confirmedKvLoad = snapshot.kvUsage;
  out.capacityBlocks = capacity;
  out.basis = "scraped+predicted";
  return out;
}

/**
 * The part of `load.pendingPrefillTokens` queued on `worker` by requests that share the
 * first `held` blocks of the prompt `keys` (the prefix's own demand, for the scheduler's
 * `samePrefixPendingTokens`): the sharing requests' share of all predicted pending
 * prefill (`all`: this router's and, through `extra`, the other replicas' requests),
 * applied to the combined figure. Undefined when nothing is held or queued (then all of
 * the queue counts as shared: the empty prefix).
 */
export function samePrefixPending(
  inFlight: InFlightTracker,
  worker: WorkerKey,
  keys: Uint32Array,
  held: number,
  load: EffectiveLoad,
  all: InFlightTotals,
  extra?: PredictedLoadSource,
): number | undefined {
  if (held === 0 || load.pendingPrefillTokens === 0 || all.pendingPrefillTokens <= 0) {
    return undefined;
  }
  let sharing = inFlight.pendingSharing(worker, keys, held);
  if (extra?.pendingSharing !== undefined) sharing += extra.pendingSharing(worker, keys, held);
  return load.pendingPrefillTokens * Math.min(1, sharing / all.pendingPrefillTokens);
}

function positiveOrNull(n: number | undefined): number | null {
  return n !== undefined && n > 0 ? n : null;
}
