/**
 * The weight of queued prefill, from the fleet's backlog. Recomputing a cached prefix on
 * another worker costs the fleet that prefill; it costs *other requests* time only when
 * there is no spare capacity to absorb it. So the discount on queued prefill (which keeps
 * a request behind its cache rather than recomputing elsewhere) grows with the backlog:
 *
 *   backlog  = least pending prefill of any eligible candidate, in this prompt's blocks
 *   w_pending' = max(w_pending, 1 / (1 + max(backlog, SPREAD_MIN_SAVING)))
 *
 * Dividing the cost by w_pending', a candidate costs (queued prefill) + (1 + λ)·(its new
 * prefill) with λ = max(backlog, SPREAD_MIN_SAVING): a request leaves its cache's holder
 * only when the seconds it would wait there exceed (1 + λ) times the seconds of prefill it
 * recomputes elsewhere. λ > 0 would charge a recomputation for the capacity it takes
 * from the requests after it (the fleet computes the prefix twice); see
 * `SPREAD_MIN_SAVING` for why the default is 0. With every worker backed up by k prompts'
 * worth of prefill λ = k, down to the configured `pending` weight as a floor. Both quantities are
 * blocks of prefill, i.e. seconds at the worker's prefill rate, so the rule needs no rate.
 */

import type { CandidateInput } from "./types.js";

/**
 * The least λ. 0: while a worker is idle a request leaves its holder as soon as waiting
 * there costs more than recomputing. Measured (docs/replay.md, "A floor under the
 * spreading"): λ = 0.25 gains 0.1 point of hit rate on the whole conversation trace but
 * costs 7 % mean TTFT there and loses hot-prefix cells to Dynamo; λ ≥ 1 makes hot
 * prefixes worse than round-robin at 87 % load. No single λ restores the hit rate, so
 * the default stays 0 until the rule sees per-prefix demand.
 */
export const SPREAD_MIN_SAVING = 0;

/** Effective weight of queued prefill for this decision. */
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
  if (!Number.isFinite(least)) return floor;
  const backlog = least / Math.max(1, promptBlocks);
  return Math.max(floor, 1 / (1 + Math.max(backlog, minSaving)));
}
