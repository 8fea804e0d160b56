/**
 * The weight of queued prefill, from the fleet's backlog. Recomputing a cached prefix on
 * another worker costs the fleet that prefill; it costs *other requests* time only when
 * there is no spare capacity to absorb it. So the discount on queued prefill (which keeps
 * a request behind its cache rather than recomputing elsewhere) should grow with the
 * backlog, and vanish when some worker is idle:
 *
 *   backlog  = least pending prefill of any eligible candidate, in this prompt's blocks
 *   w_pending' = max(w_pending, 1 / (1 + backlog))
 *
 * With an idle worker (backlog 0) the weight is 1: the cost is the request's own time to
 * first token, so a hot prefix whose holder is busy is recomputed on the idle worker and
 * gains a holder — as many holders as its demand keeps busy. With every worker backed up
 * by k prompts' worth of prefill the weight is 1/(1+k): waiting behind the cache is
 * preferred, down to the configured `pending` weight as a floor. Both quantities are in
 * blocks of prefill, i.e. seconds at the worker's prefill rate, so the rule needs no rate.
 */

import type { CandidateInput } from "./types.js";

/** Effective weight of queued prefill for this decision. */
export function backlogPendingWeight(
  candidates: readonly CandidateInput[],
  eligible: readonly boolean[],
  promptBlocks: number,
  blockSize: number,
  floor: number,
): number {
  let least = Number.POSITIVE_INFINITY;
  for (let i = 0; i < candidates.length; i++) {
    if (!eligible[i]) continue;
    const p = candidates[i]!.load.pendingPrefillTokens / blockSize;
    if (p < least) least = p;
  }
  if (!Number.isFinite(least)) return floor;
  const backlog = least / Math.max(1, promptBlocks);
  return Math.max(floor, 1 / (1 + backlog));
}
