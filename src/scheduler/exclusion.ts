/**
 * Which candidates may not be chosen: stale workers (while fresh ones exist), and KV
 * outliers (load above a hard cap, or above mean + k·std of the fresh fleet while also
 * short of headroom, above `OUTLIER_MIN_KV_LOAD`). The KV rules read the engine's own
 * figure (`confirmedKvLoad`), never a prediction alone: a client that routes and never
 * sends or reports cannot get a worker excluded. No rule
 * ever empties the field: a rule that would exclude everyone is not applied, and the
 * result says so.
 */

import { type MeanStd, meanStd, meanStdOf } from "../load/fleet-stats.js";
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
    if (staleExcluded(config, allStale)) excluded[i] = "stale";
    else penalised[i] = true;
  }

  const freshLoads: (number | null)[] = new Array(n);
  for (let i = 0; i < n; i++) {
    const c = candidates[i]!;
    freshLoads[i] = c.stale ? null : exclusionLoad(c);
  }
  const stats = meanStd(freshLoads);
  const threshold = outlierThreshold(stats, config);
  const kv: (ExclusionReason | null)[] = new Array(n).fill(null);
  let survivors = 0;
  for (let i = 0; i < n; i++) {
    if (excluded[i] !== null) continue;
    const load = exclusionLoad(candidates[i]!);
    const rule = load === null ? 0 : kvRule(load, threshold, config);
    if (rule === 0) survivors++;
    else kv[i] = EXCLUSION_CODES[rule]!;
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

/** Whether a stale candidate is excluded (else kept with the stale penalty). */
function staleExcluded(config: SchedulerConfig, allStale: boolean): boolean {
  switch (config.stalePolicy) {
    case "exclude":
      return !allStale;
    case "penalise":
      return false;
    default: {
      const never: never = config.stalePolicy;
      throw new Error(`unknown stale policy ${String(never)}`);
    }
  }
}

/** The KV rule for one candidate's exclusion load: 0 = kept, else an `EXCLUSION_CODES` index. */
function kvRule(load: number, threshold: number, config: SchedulerConfig): 0 | 2 | 3 {
  if (load > config.kvHardCap) return 2;
  if (load > threshold) return 3;
  return 0;
}

/** The KV load above which a fresh worker is an outlier (Infinity = rule off). */
function outlierThreshold(stats: MeanStd, config: SchedulerConfig): number {
  return stats.mean === null || stats.std === null || !Number.isFinite(config.outlierStdK)
    ? Infinity
    : Math.max(stats.mean + config.outlierStdK * stats.std, OUTLIER_MIN_KV_LOAD);
}

/** `ExclusionResult.excluded` as codes (the column path): index = code, 0 = eligible. */
export const EXCLUSION_CODES = [null, "stale", "kv_hard_cap", "kv_outlier"] as const;

/** What `computeExclusionsOf` returns besides the per-candidate codes it writes. */
export interface ExclusionSummary {
  readonly allStale: boolean;
  readonly kvExclusionSkipped: boolean;
  readonly kvMean: number | null;
  readonly kvStd: number | null;
}

/**
 * `computeExclusions` over columns (schedule-columns.ts): `stale[i]` non-zero when stale,
 * `load[i]` the exclusion load (`confirmedKvLoad`, else `kvLoad`; NaN = null). Writes
 * `code[i]` (an index of `EXCLUSION_CODES`) and `penalised[i]`; `fresh` is scratch of n.
 * Twin of `computeExclusions`, the same rules in the same order (same statistics to the
 * bit); `router-columns.test.ts` compares the two.
 */
export function computeExclusionsOf(
  stale: ArrayLike<number>,
  load: ArrayLike<number>,
  n: number,
  config: SchedulerConfig,
  code: Uint8Array,
  penalised: Uint8Array,
  fresh: Float64Array,
): ExclusionSummary {
  let freshCount = 0;
  for (let i = 0; i < n; i++) if (!stale[i]) freshCount++;
  const allStale = n > 0 && freshCount === 0;
  for (let i = 0; i < n; i++) {
    code[i] = 0;
    penalised[i] = 0;
    if (!stale[i]) continue;
    if (staleExcluded(config, allStale)) code[i] = 1;
    else penalised[i] = 1;
  }
  for (let i = 0; i < n; i++) fresh[i] = stale[i] ? Number.NaN : load[i]!;
  const stats = meanStdOf(fresh, n);
  const threshold = outlierThreshold(stats, config);
  let survivors = 0;
  let anyKv = false;
  // Codes 2/3 are written to `fresh` (no longer needed) first: applied only if some survive.
  for (let i = 0; i < n; i++) {
    fresh[i] = 0;
    if (code[i] !== 0) continue;
    const l = load[i]!;
    fresh[i] = Number.isNaN(l) ? 0 : kvRule(l, threshold, config);
    if (fresh[i] === 0) survivors++;
    if (fresh[i] !== 0) anyKv = true;
  }
  const kvExclusionSkipped = survivors === 0 && anyKv;
  if (!kvExclusionSkipped && anyKv) {
    for (let i = 0; i < n; i++) if (fresh[i] !== 0) code[i] = fresh[i]!;
  }
  return { allStale, kvExclusionSkipped, kvMean: stats.mean, kvStd: stats.std };
}
