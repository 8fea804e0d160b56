/**
 * Choosing among eligible candidates: at temperature 0 the lowest cost (ties broken at
 * random), above 0 a softmax over costs normalised to [0, 1], so the temperature means
 * the same thing whatever the scale of the costs. Randomness comes from the caller.
 */

import type { ExclusionSummary } from "./exclusion.js";
import type { CandidateBreakdown, ScheduleResult, SchedulerConfig, SelectReason } from "./types.js";

/** Costs closer than this (relative) are a tie. */
const TIE_EPSILON = 1e-9;

export interface Selection {
  readonly index: number;
  /** Probability of each candidate (0 for ineligible ones); `out` when one was given. */
  readonly probabilities: number[] | Float64Array;
  readonly tie: boolean;
}

/**
 * `costs[i]` is ignored where `eligible[i]` is false; at least one must be eligible.
 * `rng` returns uniform numbers in [0, 1); `out`, when given, receives the probabilities. Total order even on non-finite costs: NaN
 * ranks as +Infinity, a finite cost always beats an infinite one, and when every
 * eligible cost is infinite they tie (so a cost overflow never leaves "no candidate").
 */
export function selectCandidate(
  costs: ArrayLike<number>,
  eligible: ArrayLike<boolean | number>,
  temperature: number,
  rng: () => number,
  out?: Float64Array,
): Selection {
  const n = costs.length;
  let min = Infinity;
  let max = -Infinity;
  let any = false;
  for (let i = 0; i < n; i++) {
    if (!eligible[i]) continue;
    any = true;
    const c = rank(costs[i]!);
    if (c < min) min = c;
    if (Number.isFinite(c) && c > max) max = c;
  }
  if (!any) throw new RangeError("selectCandidate: no eligible candidate");
  // `out` (a reused buffer of ≥ n) spares a large field an array per decision.
  const probabilities = out === undefined ? new Array<number>(n).fill(0) : out.fill(0, 0, n);
  if (!Number.isFinite(min)) {
    // Every eligible cost is +Infinity/NaN (or some are -Infinity): the best ones tie.
    const best: number[] = [];
    for (let i = 0; i < n; i++) if (eligible[i] && rank(costs[i]!) === min) best.push(i);
    for (const i of best) probabilities[i] = 1 / best.length;
    const pick = best[Math.min(best.length - 1, Math.floor(rng() * best.length))]!;
    return { index: pick, probabilities, tie: best.length > 1 };
  }
  const tol = TIE_EPSILON * Math.max(1, Math.abs(min));
  if (temperature === 0 || max - min <= tol) {
    const best: number[] = [];
    for (let i = 0; i < n; i++) if (eligible[i] && rank(costs[i]!) - min <= tol) best.push(i);
    for (const i of best) probabilities[i] = 1 / best.length;
    const pick = best[Math.min(best.length - 1, Math.floor(rng() * best.length))]!;
    return { index: pick, probabilities, tie: best.length > 1 };
  }
  const range = max - min;
  let sum = 0;
  for (let i = 0; i < n; i++) {
    if (!eligible[i] || !Number.isFinite(rank(costs[i]!))) continue;
    const p = Math.exp(-(costs[i]! - min) / range / temperature);
    probabilities[i] = p;
    sum += p;
  }
  let last = -1;
  for (let i = 0; i < n; i++) {
    if (!eligible[i] || probabilities[i] === 0) continue;
    probabilities[i]! /= sum;
    last = i;
  }
  let r = rng();
  for (let i = 0; i < n; i++) {
    if (!eligible[i] || probabilities[i] === 0) continue;
    r -= probabilities[i]!;
    if (r < 0) return { index: i, probabilities, tie: false };
  }
  return { index: last, probabilities, tie: false };
}

/** NaN ranks last, like +Infinity. */
function rank(c: number): number {
  return Number.isNaN(c) ? Infinity : c;
}

/** Why the selection chose as it did (the answer's `reason`), for both scoring paths. */
export function selectReason(eligible: number, tie: boolean, temperature: number): SelectReason {
  if (eligible === 1) return "only_candidate";
  if (tie) return "lowest_cost_tie";
  return temperature > 0 ? "sampled" : "lowest_cost";
}

/**
 * The answer of a decision that chose `chosen` (at `chosenIndex` among the `considered`
 * candidates), for both scoring paths: `candidates` is the explained part of the field.
 */
export function chosenResult(
  chosenIndex: number,
  chosen: CandidateBreakdown,
  reason: SelectReason,
  config: SchedulerConfig,
  ex: ExclusionSummary,
  candidates: CandidateBreakdown[],
  considered: number,
): Extract<ScheduleResult, { ok: true }> {
  return {
    ok: true,
    chosen: chosen.worker,
    chosenIndex,
    reason,
    temperature: config.temperature,
    fallbacks: { allStale: ex.allStale, kvExclusionSkipped: ex.kvExclusionSkipped },
    kvMean: ex.kvMean,
    kvStd: ex.kvStd,
    candidates,
    chosenCandidate: chosen,
    candidatesConsidered: considered,
  };
}
