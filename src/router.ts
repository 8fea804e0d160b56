/**
 * The router: tokens → block keys → prefix matches → scheduler → decision. It selects a
 * worker and records the request as in flight there; sending the request is the
 * caller's job. Used unchanged by the HTTP service and the trace replay tool, so it does
 * no I/O, takes time as an argument and randomness/clock as dependencies.
 */

import { chainName, computeBlockKeys } from "./index/block-key.js";
import type { PrefixIndex, WorkerMatch } from "./index/types.js";
import { effectiveLoad } from "./load/effective-load.js";
import type { InFlightTracker } from "./load/in-flight.js";
import type { LoadTracker } from "./load/load-tracker.js";
import type { WorkerInfo } from "./load/types.js";
import type { WorkerRegistry } from "./load/worker-registry.js";
import type { WorkerKey } from "./protocol/worker.js";
import { SchedulerConfigError, withOverrides } from "./scheduler/config.js";
import { schedule } from "./scheduler/schedule.js";
import type {
  CandidateBreakdown,
  CandidateInput,
  ScheduleFallbacks,
  SchedulerConfig,
  SchedulerOverrides,
  SelectReason,
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
  /** Request id generator for requests without one; default `kvr-<n>`. */
  readonly newRequestId?: () => string;
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
}

/** Time spent per phase, in the clock's unit (ms). */
export interface PhaseTimings {
  readonly hashMs: number;
  readonly matchMs: number;
  readonly scoreMs: number;
}

export interface RouteDecision {
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
  readonly reason: SelectReason;
  readonly temperature: number;
  readonly fallbacks: ScheduleFallbacks;
  readonly kvMean: number | null;
  readonly kvStd: number | null;
  readonly candidates: readonly CandidateBreakdown[];
  readonly timings: PhaseTimings;
}

export type RouteErrorCode =
  | "no_workers"
  | "no_workers_for_model"
  | "duplicate_request_id"
  | "invalid_overrides";

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

const NO_MATCH = { gpu: 0, host: 0, disk: 0 } as const;
const noClock = () => 0;

export class Router {
  readonly #d: RouterDeps;
  #config: SchedulerConfig;
  readonly #clock: () => number;
  #nextId = 0;
  #storeCache: { version: number; keys: ReadonlySet<WorkerKey> } = { version: -1, keys: new Set() };

  constructor(deps: RouterDeps) {
    this.#d = deps;
    this.#config = deps.config;
    this.#clock = deps.clock ?? noClock;
  }

  get config(): SchedulerConfig {
    return this.#config;
  }

  /** Replace the scheduler config (already validated) for subsequent decisions. */
  setConfig(config: SchedulerConfig): void {
    this.#config = config;
  }

  /** Choose a worker and record the request as in flight there. */
  route(req: RouteRequest, nowMs: number): RouteResult {
    const clock = this.#clock;
    const t0 = clock();
    const d = this.#d;
    // TTLs first: an id whose request expired is free again (and must not read as a duplicate).
    d.inFlight.expire(nowMs);
    let config: SchedulerConfig;
    try {
      config = withOverrides(this.#config, req.overrides);
    } catch (err) {
      if (!(err instanceof SchedulerConfigError)) throw err;
      return fail("invalid_overrides", err.message, t0, t0, t0, t0);
    }
    if (req.requestId !== undefined && d.inFlight.has(req.requestId)) {
      return fail(
        "duplicate_request_id",
        `request id ${req.requestId} is already in flight`,
        t0,
        t0,
        t0,
        t0,
      );
    }
    const workers = d.registry.routable(req.model ?? null);
    if (workers.length === 0) {
      return req.model !== undefined && d.registry.routable(null).length > 0
        ? fail(
            "no_workers_for_model",
            `no registered worker serves model ${req.model}`,
            t0,
            t0,
            t0,
            t0,
          )
        : fail("no_workers", "no routable worker is registered", t0, t0, t0, t0);
    }
    const blockSize = d.index.blockSize;
    const keys = computeBlockKeys(req.tokenIds, blockSize, chainOf(req));
    const t1 = clock();
    const matches = d.index.findMatches(keys);
    const t2 = clock();

    const byWorker = indexMatches(matches.workers);
    const store = this.#storeOverlap(matches.workers);
    const promptTokens = req.tokenIds.length;
    const promptBlocks = keys.length >>> 1;
    const candidates: CandidateInput[] = workers.map((w) =>
      this.#candidate(w, byWorker, store, nowMs),
    );
    const result = schedule({ promptTokens, promptBlocks, blockSize, candidates }, config, d.rng);
    if (!result.ok) return fail("no_workers", result.error.message, t0, t1, t2, clock());

    const chosen = workers[result.chosenIndex]!;
    const b = result.candidates[result.chosenIndex]!;
    const requestId = req.requestId ?? this.#generateId();
    const prefillTokens = Math.round(b.newPrefillBlocks * blockSize);
    const blocks = Math.ceil(promptTokens / blockSize);
    const added = d.inFlight.add(requestId, chosen.key, { prefillTokens, blocks, nowMs });
    if (!added.ok) {
      return fail(
        "duplicate_request_id",
        `request id ${requestId} is already in flight`,
        t0,
        t1,
        t2,
        clock(),
      );
    }
    const t3 = clock();
    return {
      ok: true,
      decision: {
        requestId,
        worker: chosen.key,
        workerId: chosen.workerId,
        dpRank: chosen.dpRank,
        url: chosen.url,
        model: chosen.model,
        overlapBlocks: b.overlap.gpu,
        cachedTokens: b.overlap.gpu * blockSize,
        promptTokens,
        promptBlocks,
        blockSize,
        prefillTokens,
        blocks,
        reason: result.reason,
        temperature: result.temperature,
        fallbacks: result.fallbacks,
        kvMean: result.kvMean,
        kvStd: result.kvStd,
        candidates: result.candidates,
        timings: { hashMs: t1 - t0, matchMs: t2 - t1, scoreMs: t3 - t2 },
      },
    };
  }

  /** Overlap of the prompt per routable worker and tier. No side effects. */
  match(req: Pick<RouteRequest, "tokenIds" | "loraName" | "cacheSalt" | "model">): MatchReport {
    const d = this.#d;
    const blockSize = d.index.blockSize;
    const keys = computeBlockKeys(req.tokenIds, blockSize, chainOf(req));
    const matches = d.index.findMatches(keys);
    const byWorker = indexMatches(matches.workers);
    const store = this.#storeOverlap(matches.workers);
    return {
      promptTokens: req.tokenIds.length,
      promptBlocks: keys.length >>> 1,
      blockSize,
      store,
      workers: d.registry.routable(req.model ?? null).map((w) => {
        const m = byWorker.get(w.key) ?? NO_MATCH;
        return {
          worker: w.key,
          workerId: w.workerId,
          dpRank: w.dpRank,
          model: w.model,
          gpu: m.gpu,
          host: m.host,
          disk: m.disk,
          store,
          cachedTokens: m.gpu * blockSize,
        };
      }),
    };
  }

  #candidate(
    w: WorkerInfo,
    byWorker: ReadonlyMap<WorkerKey, WorkerMatch>,
    store: number,
    nowMs: number,
  ): CandidateInput {
    const d = this.#d;
    const stale = d.loads.isStale(w.key, nowMs);
    const snapshot = stale ? null : d.loads.snapshot(w.key);
    const all = d.inFlight.totals(w.key);
    const newer = snapshot === null ? all : d.inFlight.totalsSince(w.key, snapshot.atMs);
    const m = byWorker.get(w.key) ?? NO_MATCH;
    return {
      worker: w.key,
      overlap: { gpu: m.gpu, host: m.host, disk: m.disk, store },
      load: effectiveLoad(snapshot, all, newer, w.numGpuBlocks),
      stale,
    };
  }

  #storeOverlap(matches: readonly WorkerMatch[]): number {
    const cache = this.#storeCache;
    const registry = this.#d.registry;
    if (cache.version !== registry.version) {
      cache.version = registry.version;
      cache.keys = new Set([...registry.storeKeys(), ...(this.#d.storeHolders ?? [])]);
    }
    if (cache.keys.size === 0) return 0;
    let best = 0;
    for (const m of matches) if (cache.keys.has(m.worker) && m.disk > best) best = m.disk;
    return best;
  }

  #generateId(): string {
    const gen = this.#d.newRequestId;
    for (;;) {
      const id = gen === undefined ? `kvr-${++this.#nextId}` : gen();
      if (!this.#d.inFlight.has(id)) return id;
    }
  }
}

function indexMatches(ms: readonly WorkerMatch[]): Map<WorkerKey, WorkerMatch> {
  const map = new Map<WorkerKey, WorkerMatch>();
  for (const m of ms) map.set(m.worker, m);
  return map;
}

function fail(
  code: RouteErrorCode,
  message: string,
  t0: number,
  t1: number,
  t2: number,
  t3: number,
): RouteResult {
  return {
    ok: false,
    error: { code, message },
    timings: { hashMs: t1 - t0, matchMs: t2 - t1, scoreMs: t3 - t2 },
  };
}

/** The chain a request's keys are rooted at: its adapter and cache salt. */
function chainOf(req: Pick<RouteRequest, "loraName" | "cacheSalt">): string | null {
  return chainName(req.loraName ?? null, req.cacheSalt ?? null);
}
