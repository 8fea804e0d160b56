/**
 * The router: tokens → block keys → prefix matches → scheduler → decision. It selects a
 * worker and records the request as in flight there; sending the request is the
 * caller's job. Used unchanged by the HTTP service and the trace replay tool, so it does
 * no I/O, takes time as an argument and randomness/clock as dependencies.
 *
 * Two ways to score, one decision: a field larger than the answer explains is scored in
 * columns of numbers (`router-columns.ts`); a smaller one, `fullScoring`, or a column
 * path whose totals disagree with the cost function (counted in `columnStats`) builds
 * every candidate as an object (`#candidate`) for `schedule`, the reference.
 *
 * Long file: one route's whole sequence (its error answers, both scoring entries, the
 * in-flight record and the answer) reads best in one place; the column path, the part
 * that grows, lives in `router-columns.ts`.
 */

import { chainName, computeBlockKeys } from "./index/block-key.js";
import { MatchBuffer } from "./index/match-buffer.js";
import type { BlockKeySeq, PrefixIndex, WorkerMatch } from "./index/types.js";
import { effectiveLoad, samePrefixPending } from "./load/effective-load.js";
import { addTotals } from "./load/predicted-load-source.js";
import type { InFlightTotals, WorkerInfo } from "./load/types.js";
import { modelChain } from "./protocol/store-model.js";
import type { WorkerKey } from "./protocol/worker.js";
import { ColumnScorer } from "./router-columns.js";
import type {
  MatchReport,
  OverlapSource,
  RouteErrorCode,
  RouteRequest,
  RouteResult,
  RouterDeps,
} from "./router-types.js";
import { SchedulerConfigError, withOverrides } from "./scheduler/config.js";
import { schedule } from "./scheduler/schedule.js";
import type {
  CandidateInput,
  ScheduleResult,
  SchedulerConfig,
  TierOverlap,
} from "./scheduler/types.js";
import { randomRequestId } from "./util/request-id.js";

export type {
  MatchReport,
  OverlapSource,
  PhaseTimings,
  RouteDecision,
  RouteError,
  RouteErrorCode,
  RouteRequest,
  RouteResult,
  RouterDeps,
  WorkerOverlap,
} from "./router-types.js";

const NO_MATCH = { gpu: 0, host: 0, disk: 0 } as const;
const noClock = () => 0;
/** Candidates a decision explains by default (fleets up to this size: all of them). */
export const DEFAULT_BREAKDOWN_LIMIT = 32;

export class Router {
  readonly #d: RouterDeps;
  #config: SchedulerConfig;
  readonly #clock: () => number;
  #droppedInFlight = 0;
  #storeCache: {
    version: number;
    keys: ReadonlySet<WorkerKey>;
    /** The model of each registry store that names one (a store holds that model's KV). */
    models: ReadonlyMap<WorkerKey, string>;
    /** The model every routable engine names, if they all name the same one; else null. */
    fleetModel: string | null;
  } = { version: -1, keys: new Set(), models: new Map(), fleetModel: null };
  readonly #columns: ColumnScorer;
  /** The index's typed-array lookup, when it has one (`RadixTreeIndex`). */
  readonly #slots: SlotMatcher | null;
  readonly #matchBuffer = new MatchBuffer();
  #columnFallbacks = 0;
  #columnDecisions = 0;

  constructor(deps: RouterDeps) {
    this.#d = deps;
    this.#config = deps.config;
    this.#clock = deps.clock ?? noClock;
    this.#columns = new ColumnScorer(deps);
    this.#slots = slotMatcher(deps.index);
    // An engine's eviction ends the prediction of the block, reported or not yet met.
    const predicted = deps.predicted;
    if (predicted !== undefined) {
      (deps.index as PrefixIndex & Partial<GpuRemovals>).onGpuRemoved?.((w, hi, lo) =>
        predicted.removed(w, hi, lo),
      );
    }
  }

  /**
   * The request `requestId` never reached the engine it was routed to (connection
   * refused, 5xx or 429 before its first byte, no first byte in time): the blocks
   * predict-on-route recorded for it are taken back (those no later request recorded
   * again), so the worker is not credited with a prefix it was never given. Call it
   * before the request's `done`, while its in-flight record (which holds the prompt's
   * keys and the record's stamp until its first token) is there; false when there is
   * nothing to take back.
   */
  withdrawPrediction(requestId: string): boolean {
    const predicted = this.#d.predicted;
    const p = predicted === undefined ? null : this.#d.inFlight.takePendingPrediction(requestId);
    if (p === null) return false;
    predicted!.withdraw(p.worker, p.keys as BlockKeySeq, p.stamp);
    return true;
  }

  /**
   * The column path (router-columns.ts): decisions it made; those it handed to full
   * scoring because its totals disagreed with the cost function (a rule changed in one
   * of the twins only: a bug); and those it made although the chosen candidate's total
   * disagreed. The last two stay 0.
   */
  get columnStats(): {
    readonly decisions: number;
    readonly fallbacks: number;
    readonly late: number;
    readonly auditRepairs: number;
  } {
    return {
      decisions: this.#columnDecisions,
      fallbacks: this.#columnFallbacks,
      late: this.#columns.lateMismatches,
      auditRepairs: this.#columns.auditRepairs,
    };
  }

  get config(): SchedulerConfig {
    return this.#config;
  }

  /** In-flight records dropped because their worker was at `maxInFlightPerWorker`. */
  get droppedInFlight(): number {
    return this.#droppedInFlight;
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
    const routable = d.registry.routable(req.model ?? null);
    const exclude = req.exclude;
    const excluding = exclude !== undefined && exclude.size > 0;
    let count = routable.length;
    if (excluding) for (const w of routable) if (exclude.has(w.key)) count--;
    if (count === 0 && routable.length > 0) {
      return fail(
        "all_excluded",
        `all ${routable.length} routable worker(s) are excluded (open circuit or just failed)`,
        t0,
        t0,
        t0,
        t0,
      );
    }
    if (count === 0) {
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
    const breakdownLimit = d.candidateBreakdownLimit ?? DEFAULT_BREAKDOWN_LIMIT;
    // A field larger than the answer explains: scored in columns (router-columns.ts), the
    // same decision without an object per worker. Otherwise, or if its totals disagree
    // with the cost function (counted), every candidate is built and scored (reference).
    const columns =
      d.fullScoring !== true && count > breakdownLimit && !((d.prefillTokensPerSec ?? 0) > 0);
    // The column path reads the lookup in the index's own typed arrays when it can (no
    // object per holder); shared stores need the holders by key (`#storeOverlap`).
    const slots = columns && this.#storeKeys().size === 0 ? this.#slots : null;
    const t1 = clock();
    let matches = slots === null ? d.index.findMatches(keys) : null;
    const buffer = slots === null ? null : slots.matchInto(keys, this.#matchBuffer);
    const t2 = clock();

    const store = matches === null ? 0 : this.#storeOverlap(matches.workers, req);
    const promptTokens = req.tokenIds.length;
    const promptBlocks = keys.length >>> 1;
    /** Candidates whose overlap includes a prediction: what was reported, what predicted. */
    const sources = new Map<WorkerKey, OverlapSource>();
    let decided: { result: ScheduleResult; chosen: WorkerInfo | undefined } | null = null;
    if (columns) {
      decided = this.#columns.decide({
        routable,
        exclude,
        keys,
        matches: matches?.workers ?? null,
        buffer: slots === null ? null : { answer: buffer!, slotKey: (s) => slots.slotKey(s) },
        store,
        sources,
        nowMs,
        promptTokens,
        promptBlocks,
        blockSize,
        breakdownLimit,
        config,
      });
      if (decided === null) this.#columnFallbacks++;
      else this.#columnDecisions++;
    }
    if (decided === null) {
      matches ??= d.index.findMatches(keys);
      const workers = excluding ? routable.filter((w) => !exclude.has(w.key)) : routable;
      const byWorker = indexMatches(matches.workers);
      // Predicted blocks continue what each worker's engine reported (`matchBeyond`).
      const predicted = d.predicted?.matchBeyond(keys, nowMs, (w) => byWorker.get(w)?.gpu ?? 0);
      // Most workers hold none of the prompt: they share one overlap object.
      const none = { gpu: 0, host: 0, disk: 0, store };
      const candidates: CandidateInput[] = new Array(workers.length);
      for (let i = 0; i < workers.length; i++) {
        candidates[i] = this.#candidate(
          workers[i]!,
          byWorker,
          store,
          none,
          nowMs,
          predicted,
          keys,
          sources,
        );
      }
      const result = schedule(
        { promptTokens, promptBlocks, blockSize, candidates, breakdownLimit },
        config,
        d.rng,
      );
      decided = { result, chosen: result.ok ? workers[result.chosenIndex] : undefined };
    }
    const result = decided.result;
    if (!result.ok) return fail("no_workers", result.error.message, t0, t1, t2, clock());

    const chosen = decided.chosen!;
    const b = result.chosenCandidate;
    const requestId = req.requestId ?? this.#generateId();
    const prefillTokens = Math.round(b.newPrefillBlocks * blockSize);
    const blocks = Math.ceil(promptTokens / blockSize);
    // The cap bounds what callers that never report can pile on one worker: the oldest
    // record (the likeliest to be unreported) makes room, and is counted.
    const cap = d.maxInFlightPerWorker;
    if (cap !== undefined && d.inFlight.totals(chosen.key).activeRequests >= cap) {
      if (d.inFlight.dropOldest(chosen.key) !== null) this.#droppedInFlight++;
    }
    const record = { prefillTokens, blocks, nowMs, prefixKeys: keys };
    const added = d.inFlight.add(requestId, chosen.key, record);
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
    // Predict-on-route: the blocks past what the engine already reported there.
    if (d.predicted !== undefined) {
      const reported =
        sources.get(chosen.key)?.reportedBlocks ?? result.chosenCandidate.overlap.gpu;
      if (reported < promptBlocks) {
        const stamp = d.predicted.record(chosen.key, keys, nowMs, reported);
        d.inFlight.notePrediction(requestId, stamp);
      } else d.predicted.noteRouted(chosen.key);
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
        ...(d.predicted === undefined
          ? {}
          : {
              overlapSources: result.candidates.map(
                (c) =>
                  sources.get(c.worker) ?? { reportedBlocks: c.overlap.gpu, predictedBlocks: 0 },
              ),
            }),
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
    const store = this.#storeOverlap(matches.workers, req);
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
    none: TierOverlap,
    nowMs: number,
    predicted: ReadonlyMap<WorkerKey, number> | undefined,
    keys: BlockKeySeq,
    sources: Map<WorkerKey, OverlapSource>,
  ): CandidateInput {
    const d = this.#d;
    const stale = d.loads.isStale(w.key, nowMs);
    const snapshot = stale ? null : d.loads.snapshot(w.key);
    let all = d.inFlight.totals(w.key);
    let newer = snapshot === null ? all : d.inFlight.totalsSince(w.key, snapshot.atMs);
    const extra = d.extraLoad;
    if (extra !== undefined) {
      all = addTotals(all, extra.totals(w.key));
      newer = snapshot === null ? all : addTotals(newer, extra.totalsSince(w.key, snapshot.atMs));
    }
    const rate = d.prefillTokensPerSec ?? 0;
    if (rate > 0) {
      // What the prefill in progress has computed by now is no longer queued.
      const p = d.inFlight.prefillProgress(w.key, nowMs, rate, d.prefillOverheadMs ?? 0);
      if (p !== null && p.tokens > 0) {
        all = lessPrefill(all, p.tokens);
        newer =
          snapshot === null
            ? all
            : p.routedMs >= snapshot.atMs
              ? lessPrefill(newer, p.tokens)
              : newer;
      }
    }
    const m = byWorker.get(w.key);
    // Predicted blocks count as GPU-held (gpu ≤ host ≤ disk kept): `p` is the reported
    // overlap plus the predicted run after it, present only where it passes the report.
    const p = predicted?.get(w.key) ?? 0;
    let overlap: TierOverlap;
    if (p === 0) {
      overlap = m === undefined ? none : { gpu: m.gpu, host: m.host, disk: m.disk, store };
    } else {
      const reported = m?.gpu ?? 0;
      sources.set(w.key, { reportedBlocks: reported, predictedBlocks: p });
      const gpu = p > reported ? p : reported;
      overlap = {
        gpu,
        host: Math.max(m?.host ?? 0, gpu),
        disk: Math.max(m?.disk ?? 0, gpu),
        store,
      };
    }
    const load = effectiveLoad(snapshot, all, newer, w.numGpuBlocks);
    const same = samePrefixPending(d.inFlight, w.key, keys, overlap.disk, load, all, extra);
    if (same === undefined) return { worker: w.key, overlap, load, stale };
    return { worker: w.key, overlap, load, stale, samePrefixPendingTokens: same };
  }

  /**
   * The most leading blocks of the prompt a shared store holds for the request's model
   * (docs/cost-function.md, "Shared stores and models"). `plain`: the lookup of the
   * request's own keys, where a store's blocks of unknown model are (stored without a
   * `model_name`); its blocks of a model are keyed under that model (`modelChain`) and
   * looked up here under the request's model. The request's model is the one it names,
   * else the fleet's when every routable engine names the same one (it runs as that
   * model wherever it goes), else unknown. Then, per store:
   * - configured with a `model`: it holds that model's KV; counted only when the request's
   *   model is that one, its unnamed blocks as that model's, its blocks named for another
   *   model never;
   * - configured without: its blocks of a model count for requests of that model, its
   *   unnamed blocks only for requests naming no model (unknown on both sides).
   */
  #storeOverlap(
    plain: readonly WorkerMatch[],
    req: Pick<RouteRequest, "tokenIds" | "loraName" | "cacheSalt" | "model">,
  ): number {
    const keys = this.#storeKeys();
    if (keys.size === 0) return 0;
    const cache = this.#storeCache;
    const configured = cache.models;
    const named = req.model !== undefined;
    const model = req.model ?? cache.fleetModel;
    let best = 0;
    for (const m of plain) {
      if (!keys.has(m.worker) || m.disk <= best) continue;
      const served = configured.get(m.worker);
      if (served === undefined ? !named : served === model) best = m.disk;
    }
    if (model === null) return best;
    // The store's blocks of `model`: their own chain (only stores hold such keys).
    const d = this.#d;
    const blockSize = d.index.blockSize;
    if (Math.floor(req.tokenIds.length / blockSize) <= best) return best;
    const modelKeys = computeBlockKeys(req.tokenIds, blockSize, modelChain(model, chainOf(req)));
    for (const m of d.index.findMatches(modelKeys).workers) {
      if (!keys.has(m.worker) || m.disk <= best) continue;
      const served = configured.get(m.worker);
      if (served === undefined || served === model) best = m.disk;
    }
    return best;
  }

  /** Index keys of shared stores (registry stores and `storeHolders`). */
  #storeKeys(): ReadonlySet<WorkerKey> {
    const cache = this.#storeCache;
    const registry = this.#d.registry;
    if (cache.version !== registry.version) {
      cache.version = registry.version;
      cache.keys = new Set([...registry.storeKeys(), ...(this.#d.storeHolders ?? [])]);
      const models = new Map<WorkerKey, string>();
      for (const key of registry.storeKeys()) {
        const model = registry.get(key)?.model ?? null;
        if (model !== null) models.set(key, model);
      }
      cache.models = models;
      let fleetModel: string | null = null;
      for (const w of registry.routable(null)) {
        if (w.model === null || (fleetModel !== null && w.model !== fleetModel)) {
          fleetModel = null;
          break;
        }
        fleetModel = w.model;
      }
      cache.fleetModel = fleetModel;
    }
    return cache.keys;
  }

  #generateId(): string {
    const gen = this.#d.newRequestId;
    for (;;) {
      const id = gen === undefined ? randomRequestId() : gen();
      if (!this.#d.inFlight.has(id)) return id;
    }
  }
}

/** An index that reports the blocks engines evict from GPU (`RadixTreeIndex.onGpuRemoved`). */
interface GpuRemovals {
  onGpuRemoved(listener: (worker: WorkerKey, hi: number, lo: number) => void): void;
}

/** An index that answers lookups in reused typed arrays (`RadixTreeIndex.matchInto`). */
interface SlotMatcher {
  matchInto(keys: BlockKeySeq, out: MatchBuffer): MatchBuffer;
  slotKey(slot: number): WorkerKey;
}

function slotMatcher(index: PrefixIndex): SlotMatcher | null {
  const i = index as PrefixIndex & Partial<SlotMatcher>;
  return typeof i.matchInto === "function" && typeof i.slotKey === "function"
    ? (i as PrefixIndex & SlotMatcher)
    : null;
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

/** `t` with `tokens` fewer pending prefill tokens (a fresh object). */
function lessPrefill(t: InFlightTotals, tokens: number): InFlightTotals {
  return {
    pendingPrefillTokens: Math.max(0, t.pendingPrefillTokens - tokens),
    pendingRequests: t.pendingRequests,
    activeBlocks: t.activeBlocks,
    activeRequests: t.activeRequests,
  };
}
