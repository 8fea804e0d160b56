/**
 * Fleet-wide KV load aggregates (as Dynamo's metrics aggregator computes them): mean and
 * sample standard deviation of KV load over the workers whose load is fresh. Used by
 * the scheduler's outlier exclusion and by the HTTP status page.
 */

import type { WorkerKey } from "../protocol/worker.js";
import type { LoadTracker } from "./load-tracker.js";

export interface MeanStd {
  readonly n: number;
  /** null when n = 0. */
  readonly mean: number | null;
  /** Sample standard deviation (n − 1 in the denominator); 0 when n = 1, null when n = 0. */
  readonly std: number | null;
}

/** Mean and sample std of `values`, skipping null/NaN entries. */
export function meanStd(values: Iterable<number | null>): MeanStd {
  let n = 0;
  let sum = 0;
  let sumSq = 0;
  // Shifted by the first value for numerical stability on tightly clustered loads.
  let shift = Number.NaN;
  for (const v of values) {
    if (v === null || Number.isNaN(v)) continue;
    if (n === 0) shift = v;
    const d = v - shift;
    n++;
    sum += d;
    sumSq += d * d;
  }
  if (n === 0) return { n, mean: null, std: null };
  const mean = shift + sum / n;
  if (n === 1) return { n, mean, std: 0 };
  const variance = Math.max(0, (sumSq - (sum * sum) / n) / (n - 1));
  return { n, mean, std: Math.sqrt(variance) };
}

/**
 * `meanStd` of `values[0, n)` (NaN entries skipped), by index: the same arithmetic in the
 * same order, so the same numbers, without an iterator (a decision over thousands of
 * workers, `scheduler/exclusion.ts`).
 */
export function meanStdOf(values: ArrayLike<number>, n: number): MeanStd {
  let count = 0;
  let sum = 0;
  let sumSq = 0;
  let shift = Number.NaN;
  for (let i = 0; i < n; i++) {
    const v = values[i]!;
    if (Number.isNaN(v)) continue;
    if (count === 0) shift = v;
    const d = v - shift;
    count++;
    sum += d;
    sumSq += d * d;
  }
  if (count === 0) return { n: count, mean: null, std: null };
  const mean = shift + sum / count;
  if (count === 1) return { n: count, mean, std: 0 };
  const variance = Math.max(0, (sumSq - (sum * sum) / count) / (count - 1));
  return { n: count, mean, std: Math.sqrt(variance) };
}

export interface FleetLoadStats extends MeanStd {
  readonly workers: number;
  readonly stale: number;
  readonly unknown: number;
}

/** KV-usage statistics over the fresh scraped/pushed snapshots of `workers`. */
export function fleetLoadStats(
  tracker: LoadTracker,
  workers: Iterable<WorkerKey>,
  nowMs: number,
): FleetLoadStats {
  const loads: number[] = [];
  let total = 0;
  let stale = 0;
  let unknown = 0;
  for (const w of workers) {
    total++;
    const state = tracker.state(w, nowMs);
    if (state === "stale") stale++;
    const snap = tracker.snapshot(w);
    if (state === "fresh" && snap !== null) loads.push(snap.kvUsage);
    else if (state !== "stale") unknown++;
  }
  return { ...meanStd(loads), workers: total, stale, unknown };
}
