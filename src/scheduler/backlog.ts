/**
 * The weight of queued prefill, from the fleet's backlog and from whose demand the queue
 * is. Recomputing a cached prefix on another worker costs the fleet that prefill; it
 * costs *other requests* time only when there is no spare capacity to absorb it. So the
 * discount on queued prefill (which keeps a request behind its cache rather than
 * recomputing elsewhere) shrinks as the backlog shrinks:
 *
 *   backlog  = least pending prefill of any eligible candidate, in this prompt's blocks
 *   w(λ)     = max(w_pending, 1 / (1 + max(backlog, λ)))
 *
 * Dividing the cost by w(λ), a candidate costs (queued prefill) + (1 + λ)·(its new
 * prefill): a request leaves its cache's holder only when the seconds it would wait there
 * exceed (1 + λ) times the seconds of prefill it recomputes elsewhere. With every worker
 * backed up by k prompts' worth of prefill λ = k, down to the configured `pending`
 * weight as a floor. Both quantities are blocks of prefill, i.e. seconds at the worker's
 * prefill rate, so the rule needs no rate.
 *
 * The queue on a holder is split by whose demand it is (`CandidateInput.
 * samePrefixPendingTokens`, from the in-flight tracker):
 * - prefill of requests sharing the candidate's whole cached prefix with this prompt is
 *   that prefix's own demand: when it outgrows one holder, the prefix needs another, so
 *   it is weighed with λ = `SPREAD_MIN_SAVING` (0: hot prefixes gain holders as soon as
 *   waiting costs more than recomputing);
 * - prefill of other prefixes is weighed with λ = `OTHER_PREFIX_MIN_SAVING`: a busy
 *   holder sheds *new* prompts (which hold nothing there, so all of its queue counts for
 *   them at the first weight), not the requests whose cache it holds.
 */

import type { CandidateInput } from "./types.js";

/** λ for prefill queued by requests sharing the held prefix (the prefix's own demand). */
export const SPREAD_MIN_SAVING = 0;

/**
 * λ for prefill queued by requests of other prefixes. 8: a request leaves the worker
 * holding its cache for other work only when waiting costs 9× the recomputation.
 * Measured on the whole conversation trace (docs/replay.md, "Per-prefix demand"):
 * λ = 1, 2, 4, 8, ∞ gave hit rate 32.4, 33.6, 35.3, 36.3, 37.0 % and mean TTFT 2.64,
 * 2.58, 2.49, 2.48, 2.59 s (after the load fix: λ = 4, 8, ∞ → 35.4, 36.2, 36.9 % and
 * 2.32, 2.33, 2.45 s); 8 is the best mean with the hit rate above 0.95 × ceiling.
 */
export const OTHER_PREFIX_MIN_SAVING = 8;

/** Effective weight of queued prefill for this decision (twin: `backlogPendingWeightOf`). */
export function backlogPendingWeight(
  candidates: readonly CandidateInput[],
  eligible: readonly boolean[],
  promptBlocks: number,
  blockSize: number,
  floor: number,
  minSaving: number = SPREAD_MIN_SAVING,
): number {
  let least = Number.POSITIVE_INFINITY;
  for (let i = 0; i < candidates.length; i++) {
    if (!eligible[i]) continue;
    const p = candidates[i]!.load.pendingPrefillTokens / blockSize;
    if (p < least) least = p;
  }
  return backlogWeightOf(least, promptBlocks, floor, minSaving);
}

/**
 * `backlogPendingWeight` over columns (schedule-columns.ts): `pending[i]` is candidate
 * i's `load.pendingPrefillTokens`, `eligible[i]` non-zero when eligible. Same order of
 * operations, so the same number.
 */
export function backlogPendingWeightOf(
  pending: ArrayLike<number>,
  eligible: ArrayLike<number>,
  n: number,
  promptBlocks: number,
  blockSize: number,
  floor: number,
  minSaving: number = SPREAD_MIN_SAVING,
): number {
  let least = Number.POSITIVE_INFINITY;
  for (let i = 0; i < n; i++) {
    if (!eligible[i]) continue;
    const p = pending[i]! / blockSize;
    if (p < least) least = p;
  }
  return backlogWeightOf(least, promptBlocks, floor, minSaving);
}

/** The weight from the least backlog (in blocks; +Infinity = no eligible candidate). */
function backlogWeightOf(
  least: number,
  promptBlocks: number,
  floor: number,
  minSaving: number,
): number {
  if (!Number.isFinite(least)) return floor;
  const backlog = least / Math.max(1, promptBlocks);
  return Math.max(floor, 1 / (1 + Math.max(backlog, minSaving)));
}
