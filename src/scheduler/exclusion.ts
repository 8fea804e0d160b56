/**
 * Which candidates may not be chosen: stale workers (while fresh ones exist), and KV
 * outliers (load above a hard cap, or above mean + k·std of the fresh fleet while also
 * short of headroom, above `OUTLIER_MIN_KV_LOAD`). The KV rules read the engine's own
 * figure (`confirmedKvLoad`), never a prediction alone: a client that routes and never
 * sends or reports cannot get a worker excluded. No rule
 * ever empties the field: a rule that would exclude everyone is not applied, and the
 * result says so.
 */

import { meanStd } from "../load/fleet-stats.js";
import { OUTLIER_MIN_KV_LOAD } from "./defaults.js";
import type { CandidateInput, ExclusionReason, SchedulerConfig } from "./types.js";

export interface ExclusionResult {
  /** One entry per candidate, null = eligible. */
  readonly excluded: (ExclusionReason | null)[];
  /** Candidates kept although stale (stale penalty applies). */
  readonly penalised: boolean[];
  readonly allStale: boolean;
  readonly kvExclusionSkipped: boolean;
  readonly kvMean: number | null;
  readonly kvStd: number | null;
}

export function computeExclusions(
  candidates: readonly CandidateInput[],
  config: SchedulerConfig,
): ExclusionResult {
  const n = candidates.length;
  const excluded: (ExclusionReason | null)[] = new Array(n).fill(null);
  const penalised: boolean[] = new Array(n).fill(false);
  let fresh = 0;
  for (const c of candidates) if (!c.stale) fresh++;
  const allStale = n > 0 && fresh === 0;
  for (let i = 0; i < n; i++) {
    if (!candidates[i]!.stale) continue;
    switch (config.stalePolicy) {
      case "exclude":
        if (allStale) penalised[i] = true;
        else excluded[i] = "stale";
        break;
      case "penalise":
        penalised[i] = true;
        break;
      default: {
        const never: never = config.stalePolicy;
        throw new Error(`unknown stale policy ${String(never)}`);
      }
    }
  }

  const freshLoads: (number | null)[] = new Array(n);
  for (let i = 0; i < n; i++) {
    const c = candidates[i]!;
    freshLoads[i] = c.stale ? null : exclusionLoad(c);
  }
  const stats = meanStd(freshLoads);
  const threshold =
    stats.mean === null || stats.std === null || !Number.isFinite(config.outlierStdK)
      ? Infinity
      : Math.max(stats.mean + config.outlierStdK * stats.std, OUTLIER_MIN_KV_LOAD);
  const kv: (ExclusionReason | null)[] = new Array(n).fill(null);
  let survivors = 0;
  for (let i = 0; i < n; i++) {
    if (excluded[i] !== null) continue;
    const load = exclusionLoad(candidates[i]!);
    if (load !== null && load > config.kvHardCap) kv[i] = "kv_hard_cap";
    else if (load !== null && load > threshold) kv[i] = "kv_outlier";
    else survivors++;
  }
  const kvExclusionSkipped = survivors === 0 && kv.some((r) => r !== null);
  if (!kvExclusionSkipped) {
    for (let i = 0; i < n; i++) if (kv[i] !== null) excluded[i] = kv[i]!;
  }
  return {
    excluded,
    penalised,
    allStale,
    kvExclusionSkipped,
    kvMean: stats.mean,
    kvStd: stats.std,
  };
}

/** The KV load the exclusion rules may use (see `EffectiveLoad.confirmedKvLoad`). */
function exclusionLoad(c: CandidateInput): number | null {
  const confirmed = c.load.confirmedKvLoad;
  return confirmed === undefined ? c.load.kvLoad : confirmed;
}
