/**
 * `schedule` for a large field without an object per candidate: the candidates come as
 * columns of numbers (`CandidateColumns`, filled by the router), the exclusions, backlog
 * weights and costs are computed in loops over them (`computeExclusionsOf`,
 * `backlogPendingWeightOf`, `totalCostOf`: twins of the object functions, the same
 * expressions in the same order), and only the candidates the answer explains are built
 * as `CandidateInput` objects (`materialise`) and given their terms by `candidateCost`
 * itself. Same input, config and rng sequence → the same result as `schedule` over the
 * materialised candidates: the same choice, reason, statistics, explained candidates and
 * rng draws (`router-columns.test.ts` checks it over random fleets).
 *
 * The twins are checked on every decision: before anything is drawn from the rng, the
 * explained candidates' totals from `candidateCost` must equal the column totals to the
 * bit; when they do not (a cost rule changed in one place only), the answer is `null` and
 * the caller scores the field in full (`Router` counts it).
 */

import { backlogPendingWeightOf, OTHER_PREFIX_MIN_SAVING } from "./backlog.js";
import { candidateBreakdown, candidateCost, newPrefillBlocksOf, totalCostOf } from "./cost.js";
import { computeExclusionsOf, EXCLUSION_CODES } from "./exclusion.js";
import { chosenResult, selectCandidate, selectReason } from "./select.js";
import type {
  CandidateBreakdown,
  CandidateInput,
  CostTerms,
  ScheduleResult,
  SchedulerConfig,
} from "./types.js";

/** Per-candidate numbers, in candidate order, `[0, n)` valid; reused across decisions. */
export class CandidateColumns {
  n = 0;
  /** Decisions made although the chosen candidate's twin total disagreed (see header). */
  lateMismatches = 0;
  /** Non-zero when the candidate's load is stale. */
  stale = new Uint8Array(0);
  /** The exclusion rules' KV load (`confirmedKvLoad`, else `kvLoad`); NaN = null. */
  exclusionLoad = new Float64Array(0);
  /** `load.pendingPrefillTokens`. */
  pending = new Float64Array(0);
  /** `samePrefixPendingTokens`; NaN = absent. */
  samePrefix = new Float64Array(0);
  /** `load.activeBlocks`. */
  activeBlocks = new Float64Array(0);
  /** `load.waiting`. */
  waiting = new Float64Array(0);
  /** Overlap per tier (`store` is the same for every candidate: `ColumnsInput.store`). */
  gpu = new Float64Array(0);
  host = new Float64Array(0);
  disk = new Float64Array(0);
  /** Scratch of the scheduler. */
  readonly scratch = {
    costs: new Float64Array(0),
    code: new Uint8Array(0),
    penalised: new Uint8Array(0),
    eligible: new Uint8Array(0),
    fresh: new Float64Array(0),
    probabilities: new Float64Array(0),
  };

  /** Room for `n` candidates (contents not kept); sets `n`. */
  reserve(n: number): void {
    this.n = n;
    if (this.stale.length >= n) return;
    const size = Math.max(n, this.stale.length * 2);
    this.stale = new Uint8Array(size);
    this.exclusionLoad = new Float64Array(size);
    this.pending = new Float64Array(size);
    this.samePrefix = new Float64Array(size);
    this.activeBlocks = new Float64Array(size);
    this.waiting = new Float64Array(size);
    this.gpu = new Float64Array(size);
    this.host = new Float64Array(size);
    this.disk = new Float64Array(size);
    const s = this.scratch;
    s.costs = new Float64Array(size);
    s.code = new Uint8Array(size);
    s.penalised = new Uint8Array(size);
    s.eligible = new Uint8Array(size);
    s.fresh = new Float64Array(size);
    s.probabilities = new Float64Array(size);
  }
}

export interface ColumnsInput {
  readonly promptTokens: number;
  readonly promptBlocks: number;
  readonly blockSize: number;
  /** Leading blocks available from a shared store (every candidate's `overlap.store`). */
  readonly store: number;
  readonly columns: CandidateColumns;
  /** Most candidates explained (as `ScheduleInput.breakdownLimit`); must be < n. */
  readonly breakdownLimit: number;
  /** Candidate i as `schedule` would be given it (built only for the explained ones). */
  readonly materialise: (i: number) => CandidateInput;
}

/**
 * The decision over columns, or null when a twin disagrees with `candidateCost` (nothing
 * drawn from `rng` then: the caller can score in full with the same rng).
 */
export function scheduleColumns(
  input: ColumnsInput,
  config: SchedulerConfig,
  rng: () => number,
): Extract<ScheduleResult, { ok: true }> | null {
  const { promptTokens, promptBlocks, blockSize, store, columns: c } = input;
  const n = c.n;
  if (n === 0) throw new RangeError("scheduleColumns: no candidates");
  const { costs, code, penalised, eligible, fresh } = c.scratch;
  const ex = computeExclusionsOf(c.stale, c.exclusionLoad, n, config, code, penalised, fresh);
  let eligibleCount = 0;
  for (let i = 0; i < n; i++) {
    const e = code[i] === 0 ? 1 : 0;
    eligible[i] = e;
    eligibleCount += e;
  }
  const floor = config.weights.pending;
  const pending = backlogPendingWeightOf(c.pending, eligible, n, promptBlocks, blockSize, floor);
  const weights = pending === floor ? config.weights : { ...config.weights, pending };
  const otherPending = backlogPendingWeightOf(
    c.pending,
    eligible,
    n,
    promptBlocks,
    blockSize,
    floor,
    OTHER_PREFIX_MIN_SAVING,
  );
  // Candidates holding nothing of the prompt all have the same new prefill.
  const freshNone = newPrefillBlocksOf(
    promptTokens,
    promptBlocks,
    blockSize,
    0,
    0,
    0,
    store,
    weights,
  );
  const { gpu, host, disk } = c;
  for (let i = 0; i < n; i++) {
    const held = gpu[i] !== 0 || host[i] !== 0 || disk[i] !== 0;
    const newPrefill = held
      ? newPrefillBlocksOf(
          promptTokens,
          promptBlocks,
          blockSize,
          gpu[i]!,
          host[i]!,
          disk[i]!,
          store,
          weights,
        )
      : freshNone;
    costs[i] = totalCostOf(
      newPrefill,
      c.pending[i]!,
      c.samePrefix[i]!,
      c.activeBlocks[i]!,
      c.waiting[i]!,
      blockSize,
      weights,
      penalised[i] ? config.stalePenalty : 0,
      otherPending,
    );
  }

  // The explained candidates: the k lowest-cost eligible ones other than the chosen one.
  // The k + 1 lowest (by cost, then position) contain them whichever is chosen, so they
  // are built and checked before the rng is used.
  const k = Math.max(0, Math.floor(input.breakdownLimit) - 1);
  const lowest = lowestEligible(costs, eligible, n, k + 1);
  const built = new Map<number, { c: CandidateInput; t: CostTerms }>();
  const build = (i: number): boolean => {
    const cand = input.materialise(i);
    const t = candidateCost(
      cand,
      promptTokens,
      promptBlocks,
      blockSize,
      weights,
      penalised[i] ? config.stalePenalty : 0,
      otherPending,
    );
    built.set(i, { c: cand, t });
    return sameNumber(t.totalCost, costs[i]!);
  };
  for (const i of lowest) if (!build(i)) return null;

  const sel = selectCandidate(
    costs.subarray(0, n),
    eligible,
    config.temperature,
    rng,
    c.scratch.probabilities,
  );
  const chosen = sel.index;
  let shown = lowest.filter((i) => i !== chosen).slice(0, k);
  shown.push(chosen);
  shown = shown.sort((a, b) => a - b);
  // A chosen candidate outside the lowest (sampling, or a tie wider than the list): its
  // total is checked too, though the choice is made (a mismatch there is still counted).
  if (!built.has(chosen) && !build(chosen)) c.lateMismatches++;

  const breakdown: CandidateBreakdown[] = new Array(shown.length);
  let chosenBreakdown: CandidateBreakdown | undefined;
  for (let j = 0; j < shown.length; j++) {
    const i = shown[j]!;
    const { c: cand, t } = built.get(i)!;
    breakdown[j] = candidateBreakdown(cand, t, EXCLUSION_CODES[code[i]!]!, sel.probabilities[i]!);
    if (i === chosen) chosenBreakdown = breakdown[j];
  }
  const reason = selectReason(eligibleCount, sel.tie, config.temperature);
  return chosenResult(chosen, chosenBreakdown!, reason, config, ex, breakdown, n);
}

/**
 * The `count` lowest-cost eligible candidates, by cost (NaN as +Infinity) then position:
 * one pass keeping a small sorted list, as `schedule`'s breakdown does.
 */
function lowestEligible(
  costs: Float64Array,
  eligible: Uint8Array,
  n: number,
  count: number,
): number[] {
  const best: number[] = [];
  if (count <= 0) return best;
  let worst = Infinity;
  for (let i = 0; i < n; i++) {
    if (!eligible[i]) continue;
    const c = rankOf(costs[i]!);
    if (best.length === count && c >= worst) continue;
    let at = best.length;
    while (at > 0 && rankOf(costs[best[at - 1]!]!) > c) at--;
    best.splice(at, 0, i);
    if (best.length > count) best.pop();
    worst = rankOf(costs[best[best.length - 1]!]!);
  }
  return best;
}

/** NaN ranks last, like +Infinity (as in select.ts). */
function rankOf(c: number): number {
  return Number.isNaN(c) ? Infinity : c;
}

/** Equal numbers, NaN equal to NaN (a NaN cost is a NaN cost in both paths). */
function sameNumber(a: number, b: number): boolean {
  return a === b || (Number.isNaN(a) && Number.isNaN(b));
}
