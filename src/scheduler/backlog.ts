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
 * recomputes elsewhere. λ > 0 charges a recomputation for the capacity it takes from the
 * requests after it (the fleet computes the prefix twice), so a short queue on the holder
 * no longer moves a conversation off its cache; a hot prefix, whose demand keeps its
 * holder's queue long, still gains holders. With every worker backed up by k prompts'
 * worth of prefill λ = k, down to the configured `pending` weight as a floor. Both quantities are
 * blocks of prefill, i.e. seconds at the worker's prefill rate, so the rule needs no rate.
 */

import type { CandidateInput } from "./types.js";

/**
 * The least λ: a request leaves its cache only to save 1.25× the prefill it recomputes.
 * At 0 (weight 1 while a worker is idle) kv's hit rate on the conversation trace fell
 * from 36.1 % to 30.6 %; at 1 or more hot prefixes gain holders too late (worse than
 * round-robin at 87 % load). Measured in docs/replay.md ("Hot prefixes").
 */
export const SPREAD_MIN_SAVING = 0.25;

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
