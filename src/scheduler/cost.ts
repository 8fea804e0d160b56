/**
 * The cost of sending a prompt to one candidate, in blocks of prefill work:
 *
 *   total = w_prefill · newPrefillBlocks
 *         + w_pending · (pending prefill of requests sharing the held prefix) / blockSize
 *         + w_other   · (the rest of the pending prefill) / blockSize
 *         + w_decode  · activeBlocks
 *         + w_queue   · waiting
 *         + stalePenalty (stale and kept only)
 *
 * `newPrefillBlocks` charges each full prompt block the cheapest way the candidate can
 * get it: 0 from its GPU, `w_host` from host memory, `w_disk` from disk, `w_store` from a
 * shared store, 1 (a miss) otherwise; the partial tail block is always a miss.
 * `w_other` is the configured `pending` weight; `w_pending` may be raised above it by the
 * fleet's backlog (`backlog.ts`), so only the prefix's own demand moves it to a new holder.
 */

import type {
  CandidateBreakdown,
  CandidateInput,
  CostTerms,
  CostWeights,
  ExclusionReason,
  TierOverlap,
} from "./types.js";

/** Per-block cost of the prompt's full blocks plus the tail, for one candidate. */
export function newPrefillBlocks(
  promptTokens: number,
  promptBlocks: number,
  blockSize: number,
  overlap: TierOverlap,
  w: CostWeights,
): number {
  return newPrefillBlocksOf(
    promptTokens,
    promptBlocks,
    blockSize,
    overlap.gpu,
    overlap.host,
    overlap.disk,
    overlap.store,
    w,
  );
}

/** `newPrefillBlocks` with the overlap as numbers (the column path, schedule-columns.ts). */
export function newPrefillBlocksOf(
  promptTokens: number,
  promptBlocks: number,
  blockSize: number,
  gpuBlocks: number,
  hostBlocks: number,
  diskBlocks: number,
  storeBlocks: number,
  w: CostWeights,
): number {
  const n = promptBlocks;
  // Tiers are cumulative from the root; clamp defensively so gpu ≤ host ≤ disk ≤ n.
  const gpu = clamp(gpuBlocks, 0, n);
  const host = clamp(hostBlocks, gpu, n);
  const disk = clamp(diskBlocks, host, n);
  const store = clamp(storeBlocks, 0, n);
  const tail = Math.max(0, promptTokens - n * blockSize) / blockSize;
  // Local cost is a step function over [0,gpu) [gpu,host) [host,disk) [disk,n); the store
  // offers w_store on [0,store). Each block takes the cheaper of the two.
  let cost = 0;
  cost += segment(gpu, host, w.host, store, w.store);
  cost += segment(host, disk, w.disk, store, w.store);
  cost += segment(disk, n, 1, store, w.store);
  return cost + tail;
}

/** Cost of blocks [from, to) at `local` each, where blocks below `store` may cost `ws`. */
function segment(from: number, to: number, local: number, store: number, ws: number): number {
  if (to <= from) return 0;
  const len = to - from;
  if (ws >= local || store <= from) return len * local;
  const inStore = Math.min(store, to) - from;
  return inStore * ws + (len - inStore) * local;
}

function clamp(v: number, lo: number, hi: number): number {
  return Math.max(lo, Math.min(v, hi));
}

/**
 * All cost terms of one candidate. `penalty` is the stale penalty to add (0 if none).
 * Twin: `totalCostOf` (the column path of large fleets) computes `totalCost` from numbers;
 * change both (a change here alone is caught at run time and by router-columns.test.ts).
 */
export function candidateCost(
  c: CandidateInput,
  promptTokens: number,
  promptBlocks: number,
  blockSize: number,
  w: CostWeights,
  penalty: number,
  otherPendingWeight: number = w.pending,
): CostTerms {
  const fresh = newPrefillBlocks(promptTokens, promptBlocks, blockSize, c.overlap, w);
  const pending = c.load.pendingPrefillTokens;
  const same = Math.max(0, Math.min(pending, c.samePrefixPendingTokens ?? pending));
  const prefillCost =
    w.prefill * fresh +
    w.pending * (same / blockSize) +
    otherPendingWeight * ((pending - same) / blockSize);
  const decodeCost = w.decode * c.load.activeBlocks;
  const queueCost = w.queue * c.load.waiting;
  return {
    newPrefillBlocks: fresh,
    prefillCost,
    decodeCost,
    queueCost,
    stalePenalty: penalty,
    totalCost: prefillCost + decodeCost + queueCost + penalty,
  };
}

/**
 * `candidateCost(...).totalCost` from numbers, for the column path (schedule-columns.ts):
 * `samePrefixTokens` NaN = absent. Twin of `candidateCost`: the same expressions in the
 * same order, so the totals are equal to the bit. A change to one must be made to the
 * other: the column path checks its totals against `candidateCost` on every candidate it
 * explains and falls back to full scoring (counted) when they differ, and
 * `router-columns.test.ts` fails.
 */
export function totalCostOf(
  fresh: number,
  pending: number,
  samePrefixTokens: number,
  activeBlocks: number,
  waiting: number,
  blockSize: number,
  w: CostWeights,
  penalty: number,
  otherPendingWeight: number,
): number {
  const same = Math.max(
    0,
    Math.min(pending, Number.isNaN(samePrefixTokens) ? pending : samePrefixTokens),
  );
  const prefillCost =
    w.prefill * fresh +
    w.pending * (same / blockSize) +
    otherPendingWeight * ((pending - same) / blockSize);
  return prefillCost + w.decode * activeBlocks + w.queue * waiting + penalty;
}

/** A candidate's line in the answer: its costs `t`, why it was excluded, its probability. */
export function candidateBreakdown(
  c: CandidateInput,
  t: CostTerms,
  excluded: ExclusionReason | null,
  probability: number,
): CandidateBreakdown {
  return {
    worker: c.worker,
    overlap: c.overlap,
    newPrefillBlocks: t.newPrefillBlocks,
    prefillCost: t.prefillCost,
    decodeCost: t.decodeCost,
    queueCost: t.queueCost,
    stalePenalty: t.stalePenalty,
    totalCost: t.totalCost,
    kvLoad: c.load.kvLoad,
    stale: c.stale,
    load: c.load,
    excluded,
    probability,
  };
}
