/**
 * `schedule`: the whole decision for one prompt. Costs every candidate, applies the
 * exclusions, selects, and returns every number it used so a decision can be explained.
 */

import { backlogPendingWeight } from "./backlog.js";
import { candidateCost } from "./cost.js";
import { computeExclusions } from "./exclusion.js";
import { selectCandidate } from "./select.js";
import type {
  CandidateBreakdown,
  ScheduleInput,
  ScheduleResult,
  SchedulerConfig,
  SelectReason,
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
  const ex = computeExclusions(candidates, config);
  const costs: number[] = [];
  const eligible: boolean[] = ex.excluded.map((e) => e === null);
  const pending = backlogPendingWeight(
    candidates,
    eligible,
    promptBlocks,
    blockSize,
    config.weights.pending,
  );
  const weights =
    pending === config.weights.pending ? config.weights : { ...config.weights, pending };
  const terms = candidates.map((c, i) => {
    const t = candidateCost(
      c,
      promptTokens,
      promptBlocks,
      blockSize,
      weights,
      ex.penalised[i] ? config.stalePenalty : 0,
    );
    costs.push(t.totalCost);
    return t;
  });
  const sel = selectCandidate(costs, eligible, config.temperature, rng);
  // Explicit literals (no spread): this runs once per candidate per routed request.
  const breakdown: CandidateBreakdown[] = new Array(candidates.length);
  for (let i = 0; i < candidates.length; i++) {
    const c = candidates[i]!;
    const t = terms[i]!;
    breakdown[i] = {
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
      excluded: ex.excluded[i]!,
      probability: sel.probabilities[i]!,
    };
  }
  let eligibleCount = 0;
  for (const e of eligible) if (e) eligibleCount++;
  const reason: SelectReason =
    eligibleCount === 1
      ? "only_candidate"
      : sel.tie
        ? "lowest_cost_tie"
        : config.temperature > 0
          ? "sampled"
          : "lowest_cost";
  return {
    ok: true,
    chosen: candidates[sel.index]!.worker,
    chosenIndex: sel.index,
    reason,
    temperature: config.temperature,
    fallbacks: { allStale: ex.allStale, kvExclusionSkipped: ex.kvExclusionSkipped },
    kvMean: ex.kvMean,
    kvStd: ex.kvStd,
    candidates: breakdown,
  };
}
