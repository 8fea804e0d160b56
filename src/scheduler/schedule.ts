/**
 * `schedule`: the whole decision for one prompt. Costs every candidate, applies the
 * exclusions, selects, and returns every number it used so a decision can be explained:
 * for every candidate, or with `breakdownLimit` set and a larger field, for the
 * lowest-cost ones and the chosen one (a fleet of thousands is still scored in full;
 * only the explanation is cut). Per candidate it keeps one number, not objects.
 * The router scores fields larger than the explanation with `scheduleColumns`
 * (schedule-columns.ts), the same decision from columns of numbers; this is the
 * reference it is tested against.
 */

import { backlogPendingWeight, OTHER_PREFIX_MIN_SAVING } from "./backlog.js";
import { candidateBreakdown, candidateCost } from "./cost.js";
import { computeExclusions } from "./exclusion.js";
import { chosenResult, selectCandidate, selectReason } from "./select.js";
import type {
  CandidateBreakdown,
  ScheduleInput,
  ScheduleResult,
  SchedulerConfig,
} from "./types.js";

/**
 * Pick a worker for a prompt. Pure: same input, config and rng sequence → same result.
 * `config` should already include per-request overrides (`withOverrides`).
 */
export function schedule(
  input: ScheduleInput,
  config: SchedulerConfig,
  rng: () => number,
): ScheduleResult {
  const { candidates, promptTokens, promptBlocks, blockSize } = input;
  if (candidates.length === 0) {
    return {
      ok: false,
      error: {
        code: "no_candidates",
        message: "no routable worker is registered for this request",
      },
      candidates: [],
    };
  }
  const n = candidates.length;
  const ex = computeExclusions(candidates, config);
  const eligible: boolean[] = new Array(n);
  for (let i = 0; i < n; i++) eligible[i] = ex.excluded[i] === null;
  const pending = backlogPendingWeight(
    candidates,
    eligible,
    promptBlocks,
    blockSize,
    config.weights.pending,
  );
  const weights =
    pending === config.weights.pending ? config.weights : { ...config.weights, pending };
  // Prefill queued by requests of other prefixes moves a request off its cache only when
  // waiting behind it costs (1 + OTHER_PREFIX_MIN_SAVING)× the recomputation (backlog.ts).
  const otherPending = backlogPendingWeight(
    candidates,
    eligible,
    promptBlocks,
    blockSize,
    config.weights.pending,
    OTHER_PREFIX_MIN_SAVING,
  );
  const costOf = (i: number) =>
    candidateCost(
      candidates[i]!,
      promptTokens,
      promptBlocks,
      blockSize,
      weights,
      ex.penalised[i] ? config.stalePenalty : 0,
      otherPending,
    );
  // Only the totals are kept for every candidate; the terms are recomputed (the same pure
  // function) for the candidates the breakdown explains.
  const costs = new Float64Array(n);
  for (let i = 0; i < n; i++) costs[i] = costOf(i).totalCost;
  const sel = selectCandidate(costs, eligible, config.temperature, rng);
  const limit = input.breakdownLimit ?? Infinity;
  const shown = n <= limit ? null : explained(costs, eligible, sel.index, limit);
  const count = shown === null ? n : shown.length;
  // Explicit literals (no spread): this runs once per explained candidate per request.
  const breakdown: CandidateBreakdown[] = new Array(count);
  let chosenBreakdown: CandidateBreakdown | undefined;
  for (let j = 0; j < count; j++) {
    const i = shown === null ? j : shown[j]!;
    const c = candidates[i]!;
    const t = costOf(i);
    breakdown[j] = candidateBreakdown(c, t, ex.excluded[i]!, sel.probabilities[i]!);
    if (i === sel.index) chosenBreakdown = breakdown[j];
  }
  let eligibleCount = 0;
  for (const e of eligible) if (e) eligibleCount++;
  const reason = selectReason(eligibleCount, sel.tie, config.temperature);
  return chosenResult(sel.index, chosenBreakdown!, reason, config, ex, breakdown, n);
}

/**
 * The candidates a large field's breakdown explains: the `limit` − 1 lowest-cost eligible
 * ones and the chosen one, in input order. One pass keeping a small sorted list (no sort
 * of the field); ties keep the earlier candidate.
 */
function explained(
  costs: Float64Array,
  eligible: readonly boolean[],
  chosen: number,
  limit: number,
): number[] {
  const k = Math.max(0, Math.floor(limit) - 1);
  const best: number[] = [];
  for (let i = 0; i < costs.length; i++) {
    if (!eligible[i] || i === chosen) continue;
    const c = rankOf(costs[i]!);
    if (best.length === k && (k === 0 || c >= rankOf(costs[best[k - 1]!]!))) continue;
    let at = best.length;
    while (at > 0 && rankOf(costs[best[at - 1]!]!) > c) at--;
    best.splice(at, 0, i);
    if (best.length > k) best.pop();
  }
  best.push(chosen);
  return best.sort((a, b) => a - b);
}

/** NaN ranks last, like +Infinity (as in select.ts). */
function rankOf(c: number): number {
  return Number.isNaN(c) ? Infinity : c;
}
