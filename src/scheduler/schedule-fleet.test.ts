/**
 * The scheduler's data flow for large fleets (one number per candidate, the breakdown cut
 * to the lowest-cost ones and the chosen one) must not change any decision: over random
 * fleets, `schedule` agrees with the full-breakdown implementation it replaced (kept
 * here verbatim as `referenceSchedule`) on the choice, the reason, the fleet statistics,
 * every explained candidate's numbers, and the rng draws.
 */

import { describe, expect, it } from "vitest";
import { backlogPendingWeight } from "./backlog.js";
import { candidateCost } from "./cost.js";
import { DEFAULT_SCHEDULER_CONFIG } from "./defaults.js";
import { computeExclusions } from "./exclusion.js";
import { schedule } from "./schedule.js";
import { selectCandidate } from "./select.js";
import { cand, seededRng } from "./test-helpers.js";
import type {
  CandidateBreakdown,
  CandidateInput,
  ScheduleInput,
  ScheduleResult,
  SchedulerConfig,
  SelectReason,
} from "./types.js";

/** The result shape before `chosenCandidate` and `candidatesConsidered` were added. */
type ReferenceResult =
  | Exclude<ScheduleResult, { ok: true }>
  | Omit<Extract<ScheduleResult, { ok: true }>, "chosenCandidate" | "candidatesConsidered">;

/** The pre-change `schedule` (src/scheduler/schedule.ts before the large-fleet rework). */
function referenceSchedule(
  input: ScheduleInput,
  config: SchedulerConfig,
  rng: () => number,
): ReferenceResult {
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

function randomFleet(rng: () => number, n: number, promptBlocks: number): CandidateInput[] {
  const pick = (k: number) => Math.floor(rng() * k);
  return Array.from({ length: n }, (_, i) => {
    const gpu = rng() < 0.2 ? pick(promptBlocks + 1) : 0;
    const host = gpu + (rng() < 0.3 ? pick(promptBlocks - gpu + 1) : 0);
    const disk = host + (rng() < 0.2 ? pick(promptBlocks - host + 1) : 0);
    const scraped = rng() < 0.8;
    const kv = rng() < 0.05 ? 0.99 : rng() * 0.6;
    return cand(`w${i}`, {
      overlap: { gpu, host, disk, store: 0 },
      // Coarse loads so that equal costs (ties, broken by the rng) are common.
      load: {
        pendingPrefillTokens: pick(4) * 64,
        activeBlocks: pick(6) * 10,
        waiting: pick(3),
        running: pick(4),
        kvLoad: scraped ? kv : null,
        confirmedKvLoad: scraped ? kv : null,
        capacityBlocks: 1024,
        basis: scraped ? "scraped+predicted" : "predicted",
      },
      stale: rng() < 0.03,
    });
  });
}

const configs: SchedulerConfig[] = [
  DEFAULT_SCHEDULER_CONFIG,
  { ...DEFAULT_SCHEDULER_CONFIG, temperature: 0.3 },
  { ...DEFAULT_SCHEDULER_CONFIG, kvHardCap: 0.5, outlierStdK: 1, stalePolicy: "penalise" },
];

describe("schedule over large random fleets", () => {
  it("chooses exactly as the full-breakdown implementation, explaining the best and the chosen", () => {
    const gen = seededRng(12);
    for (let round = 0; round < 60; round++) {
      const n = [1, 2, 31, 32, 33, 500, 3000][round % 7]!;
      const promptBlocks = 1 + Math.floor(gen() * 40);
      const candidates = randomFleet(gen, n, promptBlocks);
      const config = configs[round % configs.length]!;
      const limit = [32, 8, 1, Infinity][round % 4]!;
      const input: ScheduleInput = {
        promptTokens: promptBlocks * 16 + (round % 16),
        promptBlocks,
        blockSize: 16,
        candidates,
      };
      const seed = 1000 + round;
      const refRng = seededRng(seed);
      const newRng = seededRng(seed);
      const ref = referenceSchedule(input, config, refRng);
      const got = schedule({ ...input, breakdownLimit: limit }, config, newRng);
      // Same number of rng draws: the next draw agrees.
      expect(newRng()).toBe(refRng());
      if (!ref.ok || !got.ok) throw new Error("both should choose");
      expect(got.chosen).toBe(ref.chosen);
      expect(got.chosenIndex).toBe(ref.chosenIndex);
      expect(got.reason).toBe(ref.reason);
      expect(got.fallbacks).toEqual(ref.fallbacks);
      expect(got.kvMean).toBe(ref.kvMean);
      expect(got.kvStd).toBe(ref.kvStd);
      expect(got.candidatesConsidered).toBe(n);
      expect(got.chosenCandidate).toEqual(ref.candidates[ref.chosenIndex]);
      const byWorker = new Map(ref.candidates.map((c, i) => [c.worker, i]));
      const shown = got.candidates.map((c) => byWorker.get(c.worker)!);
      for (const [j, i] of shown.entries()) expect(got.candidates[j]).toEqual(ref.candidates[i]);
      if (n <= limit) {
        expect(shown).toEqual(ref.candidates.map((_, i) => i));
        continue;
      }
      // Explained: the chosen one and the limit − 1 cheapest other eligible ones (ties
      // to the earlier), in input order.
      const others = ref.candidates
        .map((c, i) => ({ i, cost: c.totalCost, ok: c.excluded === null }))
        .filter((x) => x.ok && x.i !== ref.chosenIndex)
        .sort((a, b) => a.cost - b.cost || a.i - b.i)
        .slice(0, limit - 1)
        .map((x) => x.i);
      expect(shown).toEqual([...others, ref.chosenIndex].sort((a, b) => a - b));
    }
  });
});
