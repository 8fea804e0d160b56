/**
 * The router's contract: its dependencies, what a route request carries, and the
 * decision, error and match report it answers with (`router.ts` implements it).
 */

import type { PrefixIndex } from "./index/types.js";
import type { InFlightTracker } from "./load/in-flight.js";
import type { LoadTracker } from "./load/load-tracker.js";
import type { PredictedLoadSource } from "./load/predicted-load-source.js";
import type { WorkerRegistry } from "./load/worker-registry.js";
import type { PredictedBlocks } from "./predict/predicted-blocks.js";
import type { WorkerKey } from "./protocol/worker.js";
import type {
  ScheduleResult,
  SchedulerConfig,
  SchedulerOverrides,
  TierOverlap,
} from "./scheduler/types.js";

export interface RouterDeps {
  readonly index: PrefixIndex;
  readonly registry: WorkerRegistry;
  readonly loads: LoadTracker;
  readonly inFlight: InFlightTracker;
  readonly config: SchedulerConfig;
  /** Uniform in [0, 1). */
  readonly rng: () => number;
  /** Milliseconds for phase timings (e.g. `performance.now`); default: no timing (zeros). */
  readonly clock?: () => number;
  /** Extra index keys of shared stores (besides registry entries of kind mooncake-store). */
  readonly storeHolders?: readonly WorkerKey[];
  /** Id generator for requests without one; default `randomRequestId` (128 random bits). */
  readonly newRequestId?: () => string;
  /** Most in-flight records per worker; past it the oldest is dropped, counted. Default ∞. */
  readonly maxInFlightPerWorker?: number;
  /** Predicted load routed by others (router replicas), added to our own in-flight. */
  readonly extraLoad?: PredictedLoadSource;
  /**
   * The workers' prefill rate, uncached tokens per second (config
   * `inFlight.prefillTokensPerSec`; absent or 0: not known). When known, a worker's queued
   * prefill leaves out what its prefill in progress has already computed
   * (`InFlightTracker.prefillProgress`), and every decision is scored in full (the column
   * path has no time-dependent term).
   */
  readonly prefillTokensPerSec?: number;
  /** The per-request part of a worker's prefill, ms (`inFlight.prefillOverheadMs`; default 0). */
  readonly prefillOverheadMs?: number;
  /**
   * Most candidates a decision's `candidates` explains (default
   * `DEFAULT_BREAKDOWN_LIMIT`, 32): with a larger field it lists the lowest-cost ones and
   * the chosen one. Every routable worker is scored either way; Infinity = all.
   */
  readonly candidateBreakdownLimit?: number;
  /**
   * Score every candidate as an object (`scheduler/schedule.ts`), the reference path,
   * even when the field is larger than `candidateBreakdownLimit`. Default false: such a
   * field is scored in columns (`router-columns.ts`), the same decisions, cheaper.
   */
  readonly fullScoring?: boolean;
  /**
   * Predict-on-route and degraded mode (docs/prediction.md): routed prompts' blocks count
   * as held by the chosen worker until confirmed or expired. Absent = off.
   */
  readonly predicted?: PredictedBlocks;
}

export interface RouteRequest {
  readonly tokenIds: ArrayLike<number>;
  readonly loraName?: string | null;
  /** The request's cache salt (vLLM/SGLang `cache_salt`): only same-salt blocks match. */
  readonly cacheSalt?: string | null;
  /** Caller's id, used later for first-token / done reports; generated when absent. */
  readonly requestId?: string;
  /** Only workers serving this model (or any model) are candidates. */
  readonly model?: string;
  readonly overrides?: SchedulerOverrides;
  /** Workers that may not be chosen (the gateway's open circuits, its last failed attempt). */
  readonly exclude?: ReadonlySet<WorkerKey>;
}

/** Time spent per phase, in the clock's unit (ms). */
export interface PhaseTimings {
  readonly hashMs: number;
  readonly matchMs: number;
  readonly scoreMs: number;
}

/** The scheduler's choice, as `schedule` returns it. */
type ScheduleChoice = Extract<ScheduleResult, { readonly ok: true }>;

/** The decision: the chosen worker, what was recorded in flight, and the scheduler's report. */
export interface RouteDecision
  extends Pick<
    ScheduleChoice,
    "reason" | "temperature" | "fallbacks" | "kvMean" | "kvStd" | "candidates"
  > {
  readonly requestId: string;
  readonly worker: WorkerKey;
  readonly workerId: string;
  readonly dpRank: number;
  readonly url: string;
  readonly model: string | null;
  /** Leading prompt blocks the chosen worker holds in GPU memory. */
  readonly overlapBlocks: number;
  /** overlapBlocks × blockSize. */
  readonly cachedTokens: number;
  readonly promptTokens: number;
  readonly promptBlocks: number;
  readonly blockSize: number;
  /** Uncached prefill tokens recorded in flight for the chosen worker (tier-weighted). */
  readonly prefillTokens: number;
  /** KV blocks recorded in flight for the chosen worker. */
  readonly blocks: number;
  /**
   * Per candidate (same order): leading GPU blocks the engine reported (the index) and
   * the router predicted from its own recent decisions. The candidate's overlap, which the
   * cost used, is the larger of the two; a prediction is never an engine's report.
   * Absent when prediction is off (every overlap was reported).
   */
  readonly overlapSources?: readonly OverlapSource[];
  readonly timings: PhaseTimings;
}

export interface OverlapSource {
  readonly reportedBlocks: number;
  readonly predictedBlocks: number;
}

export type RouteErrorCode =
  | "no_workers"
  | "no_workers_for_model"
  | "duplicate_request_id"
  | "invalid_overrides"
  | "all_excluded";

export interface RouteError {
  readonly code: RouteErrorCode;
  readonly message: string;
}

export type RouteResult =
  | { readonly ok: true; readonly decision: RouteDecision }
  | { readonly ok: false; readonly error: RouteError; readonly timings: PhaseTimings };

export interface WorkerOverlap extends TierOverlap {
  readonly worker: WorkerKey;
  readonly workerId: string;
  readonly dpRank: number;
  readonly model: string | null;
  /** gpu × blockSize. */
  readonly cachedTokens: number;
}

export interface MatchReport {
  readonly promptTokens: number;
  readonly promptBlocks: number;
  readonly blockSize: number;
  /** Leading blocks available from a shared store. */
  readonly store: number;
  readonly workers: readonly WorkerOverlap[];
}
