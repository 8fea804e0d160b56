/**
 * Scheduler contracts. The scheduler is a pure function of the prompt size, each
 * candidate's cache overlap and load, the weights, the temperature and an rng; it never
 * looks anything up itself (see `docs/cost-function.md`).
 */

import type { EffectiveLoad } from "../load/types.js";
import type { WorkerKey } from "../protocol/worker.js";

/** Relative costs of the terms; all costs are in "blocks of prefill work". */
export interface CostWeights {
  /** Multiplier of this request's own uncached prompt blocks. */
  readonly prefill: number;
  /**
   * Multiplier of prefill already queued on the worker (in-flight requests' uncached
   * tokens, in blocks). Below `prefill` it trades this request's wait for fleet-wide cache
   * reuse: see docs/cost-function.md.
   */
  readonly pending: number;
  /** Multiplier of active (decoding) KV blocks. */
  readonly decode: number;
  /** Cost of one waiting request, in blocks. */
  readonly queue: number;
  /** Cost of a block found in host memory, as a fraction of a miss (0 = free, 1 = miss). */
  readonly host: number;
  /** Cost of a block found on disk (or any slower local tier), as a fraction of a miss. */
  readonly disk: number;
  /** Cost of a block found in a shared store (Mooncake), as a fraction of a miss. */
  readonly store: number;
}

/** How stale workers are treated. */
export type StalePolicy =
  /** Excluded while any fresh candidate exists; if every candidate is stale, all kept + penalised. */
  | "exclude"
  /** Always kept, with `stalePenalty` added to their cost. */
  | "penalise";

export interface SchedulerConfig {
  readonly weights: CostWeights;
  /** 0 = pick the lowest cost (random tie break); > 0 = softmax over normalised costs. */
  readonly temperature: number;
  /** Exclude candidates whose KV load exceeds mean + k·std of fresh candidates; Infinity = off. */
  readonly outlierStdK: number;
  /** Exclude candidates whose KV load exceeds this (0..1); Infinity = off. */
  readonly kvHardCap: number;
  readonly stalePolicy: StalePolicy;
  /** Cost (blocks) added to a stale candidate that is kept. */
  readonly stalePenalty: number;
}

/** Per-request overrides of weights and temperature. */
export type SchedulerOverrides = Partial<CostWeights> & { readonly temperature?: number };

/** Leading-prefix overlap of the prompt on one candidate, per tier, in blocks. */
export interface TierOverlap {
  /** Blocks in GPU memory (from `WorkerMatch.gpu`). */
  readonly gpu: number;
  /** Blocks in GPU or host memory (cumulative, ≥ gpu). */
  readonly host: number;
  /** Blocks in any local tier (cumulative, ≥ host). */
  readonly disk: number;
  /** Leading blocks available from a shared store (independent of the local tiers). */
  readonly store: number;
}

export interface CandidateInput {
  readonly worker: WorkerKey;
  readonly overlap: TierOverlap;
  readonly load: EffectiveLoad;
  readonly stale: boolean;
  /**
   * The part of `load.pendingPrefillTokens` queued by requests that share this
   * candidate's whole overlap with the prompt: the prefix's own demand on this worker
   * (`backlog.ts`). Absent: all of it (a candidate holding nothing of the prompt shares
   * only the empty prefix, with every request).
   */
  readonly samePrefixPendingTokens?: number;
}

export interface ScheduleInput {
  /** Prompt length in tokens. */
  readonly promptTokens: number;
  /** Full blocks of the prompt (what the index was asked about). */
  readonly promptBlocks: number;
  readonly blockSize: number;
  readonly candidates: readonly CandidateInput[];
  /**
   * Most candidates the result's breakdown explains (undefined = all). With more
   * candidates than this, it lists the `breakdownLimit` − 1 lowest-cost eligible ones and
   * the chosen one, in input order. Every candidate is scored either way.
   */
  readonly breakdownLimit?: number;
}

/** Why a candidate was not eligible. */
export type ExclusionReason = "stale" | "kv_hard_cap" | "kv_outlier";

/** The terms of one candidate's cost (`cost.ts`), in blocks of prefill work. */
export interface CostTerms {
  /** The new request's prefill in blocks after tier discounts (misses + weighted hits + tail). */
  readonly newPrefillBlocks: number;
  /** weights.prefill × newPrefillBlocks + weights.pending × pending prefill blocks. */
  readonly prefillCost: number;
  /** weights.decode × active blocks. */
  readonly decodeCost: number;
  /** weights.queue × waiting requests. */
  readonly queueCost: number;
  /** stalePenalty when the candidate is stale and kept, else 0. */
  readonly stalePenalty: number;
  readonly totalCost: number;
}

/** Every number the decision used for one candidate: its cost terms and their inputs. */
export interface CandidateBreakdown extends CostTerms {
  readonly worker: WorkerKey;
  readonly overlap: TierOverlap;
  readonly kvLoad: number | null;
  readonly stale: boolean;
  readonly load: EffectiveLoad;
  /** null = eligible. */
  readonly excluded: ExclusionReason | null;
  /** Selection probability (1/0 at temperature 0 apart from ties; softmax otherwise). */
  readonly probability: number;
}

/** How the choice was made. */
export type SelectReason =
  | "only_candidate"
  | "lowest_cost"
  /** Lowest cost shared by several candidates; one picked at random. */
  | "lowest_cost_tie"
  | "sampled";

/** Fallbacks that kept candidates a rule would have removed. */
export interface ScheduleFallbacks {
  /** Every candidate was stale, so none was excluded for staleness. */
  readonly allStale: boolean;
  /** KV exclusion would have removed every candidate, so it was not applied. */
  readonly kvExclusionSkipped: boolean;
}

export type ScheduleErrorCode = "no_candidates";

export type ScheduleResult =
  | {
      readonly ok: true;
      readonly chosen: WorkerKey;
      readonly chosenIndex: number;
      readonly reason: SelectReason;
      readonly temperature: number;
      readonly fallbacks: ScheduleFallbacks;
      /** Fleet KV load statistics over fresh candidates (mean, sample std). */
      readonly kvMean: number | null;
      readonly kvStd: number | null;
      /** Every candidate, or the explained ones (see `ScheduleInput.breakdownLimit`). */
      readonly candidates: readonly CandidateBreakdown[];
      /** The chosen candidate's breakdown (also in `candidates`). */
      readonly chosenCandidate: CandidateBreakdown;
      /** Candidates scored: all of the input's. */
      readonly candidatesConsidered: number;
    }
  | {
      readonly ok: false;
      readonly error: { readonly code: ScheduleErrorCode; readonly message: string };
      readonly candidates: readonly CandidateBreakdown[];
    };
