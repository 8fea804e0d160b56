/**
 * The `kv` policy: the service's own Router (block keys → prefix index → scheduler →
 * in-flight record) deciding for the simulated fleet. Everything the service would get
 * from the outside arrives here the same way: KV events are applied to the index with
 * `applyEvent` in each worker's order, scrapes become load snapshots, and first-token /
 * done reports end the in-flight records.
 */

import { FIELDS } from "../config/fields.js";
import type { ApplyStatus, PrefixIndex } from "../index/types.js";
import { InFlightTracker } from "../load/in-flight.js";
import { LoadTracker } from "../load/load-tracker.js";
import { WorkerRegistry } from "../load/worker-registry.js";
import type { KvEvent } from "../protocol/events.js";
import { type WorkerKey, workerKey } from "../protocol/worker.js";
import { Router } from "../router.js";
import type { SchedulerConfig } from "../scheduler/types.js";
import type { Rng } from "../util/rng.js";
import { KvPredict, type KvPredictOptions } from "./kv-predict.js";
import type { RoutingPolicy, ScrapedLoad } from "./policies.js";
import type { RequestOutcome } from "./sim-fleet.js";
import type { TraceRequest } from "./trace.js";

export interface KvPolicyOptions {
  readonly workers: number;
  /** The router's prefix index (a fresh, empty one). */
  readonly index: PrefixIndex;
  /** Usable KV blocks per worker, as a worker's config would declare them. */
  readonly capacityBlocks: number;
  readonly config: SchedulerConfig;
  readonly rng: Rng;
  /** Load snapshots older than this are stale (service default when omitted). */
  readonly staleAfterMs?: number;
  /** Predict-on-route, degraded-mode fallback and injected stream faults (kv-predict.ts). */
  readonly predict?: KvPredictOptions;
  /**
   * The workers' prefill rate and per-request overhead as configured
   * (`inFlight.prefillTokensPerSec`, `inFlight.prefillOverheadMs`); absent: unknown.
   */
  readonly prefill?: { readonly tokensPerSec: number; readonly overheadMs: number };
}

/** The Router wired to a simulated fleet. */
export class KvPolicy implements RoutingPolicy {
  readonly name = "kv";
  readonly wantsKvEvents = true;
  readonly router: Router;
  readonly index: PrefixIndex;
  readonly inFlight: InFlightTracker;
  readonly loads: LoadTracker;
  readonly #keys: WorkerKey[];
  readonly #indexOf: Map<WorkerKey, number>;
  /** Apply outcomes other than "applied", by status (should stay empty). */
  readonly eventProblems = new Map<ApplyStatus, number>();
  /** Present when predict-on-route, the fallback or a fault is asked for. */
  readonly predict: KvPredict | null;

  constructor(o: KvPolicyOptions) {
    this.index = o.index;
    const { registry, keys, indexOf } = simRegistry(o.workers, o.index.blockSize, o.capacityBlocks);
    this.#keys = keys;
    this.#indexOf = indexOf;
    this.loads = new LoadTracker({
      staleAfterMs: o.staleAfterMs ?? FIELDS.load.staleAfterMs.default,
    });
    this.inFlight = new InFlightTracker({
      prefillTtlMs: FIELDS.inFlight.prefillTtlMs.default,
      ttlMs: FIELDS.inFlight.ttlMs.default,
    });
    const p = o.predict;
    this.predict =
      p === undefined || (p.ttlMs === 0 && !p.fallback && p.faults.length === 0)
        ? null
        : new KvPredict(p, this.#keys, o.capacityBlocks);
    this.router = new Router({
      index: o.index,
      registry,
      loads: this.loads,
      inFlight: this.inFlight,
      config: o.config,
      rng: o.rng,
      ...(this.predict === null ? {} : { predicted: this.predict.predicted }),
      ...(o.prefill === undefined
        ? {}
        : {
            prefillTokensPerSec: o.prefill.tokensPerSec,
            prefillOverheadMs: o.prefill.overheadMs,
          }),
    });
  }

  /** The worker key the router knows worker `w` by. */
  keyOf(w: number): WorkerKey {
    return this.#keys[w] ?? workerKey(`sim-${w}`);
  }

  choose(req: TraceRequest, tokens: readonly number[], nowMs: number): number {
    this.predict?.tick(nowMs, (key) => this.index.removeWorker(key));
    const res = this.router.route({ tokenIds: tokens, requestId: String(req.index) }, nowMs);
    if (!res.ok) throw new Error(`router refused request ${req.index}: ${res.error.message}`);
    const d = res.decision;
    if (this.predict !== null) {
      const i = d.candidates.findIndex((c) => c.worker === d.worker);
      const source = d.overlapSources?.[i];
      const predicted = source?.predictedBlocks ?? 0;
      const reported = source?.reportedBlocks ?? d.overlapBlocks;
      this.predict.routed(req.index, d.worker, d.cachedTokens, predicted, reported);
    }
    return this.#indexOf.get(d.worker)!;
  }

  onKvEvent(w: number, event: KvEvent, nowMs = 0): void {
    const p = this.predict;
    if (p !== null) {
      p.tick(nowMs, (key) => this.index.removeWorker(key));
      if (!p.delivers(w, nowMs)) return;
    }
    const r = this.index.applyEvent(this.#keys[w]!, event);
    p?.counted(w, event, r.status);
    // The engine emptied its cache: what the router predicted there is gone too.
    if (p !== null && event.type === "cleared") p.predicted.clearWorker(this.#keys[w]!);
    if (r.status !== "applied") {
      this.eventProblems.set(r.status, (this.eventProblems.get(r.status) ?? 0) + 1);
    }
  }

  onScrape(w: number, load: ScrapedLoad, nowMs: number): void {
    applyScrape(this.loads, this.#keys[w]!, load, nowMs);
  }

  onFirstToken(o: RequestOutcome, nowMs: number): void {
    this.predict?.served(o.index, o.hitTokens);
    this.inFlight.firstToken(String(o.index), nowMs);
  }

  onDone(o: RequestOutcome, nowMs: number): void {
    // A prompt the worker refused (larger than its cache: vLLM's 400) cached nothing there.
    if (o.rejected) this.router.withdrawPrediction(String(o.index));
    this.inFlight.done(String(o.index), nowMs);
  }
}

/** Feed a replayed scrape to a router's load tracker, as the service's scraper would. */
export function applyScrape(
  loads: LoadTracker,
  key: WorkerKey,
  load: ScrapedLoad,
  nowMs: number,
): void {
  loads.update(
    key,
    {
      running: load.running,
      waiting: load.waiting,
      kvUsage: Math.min(1, Math.max(0, load.kvUsage)),
      numGpuBlocks: load.numGpuBlocks,
      atMs: nowMs,
    },
    nowMs,
    "scrape",
  );
}

/** The replayed fleet's workers `sim-0`, `sim-1`, … registered as a router sees them. */
export function simRegistry(
  workers: number,
  blockSize: number,
  capacityBlocks: number,
): { registry: WorkerRegistry; keys: WorkerKey[]; indexOf: Map<WorkerKey, number> } {
  const registry = new WorkerRegistry();
  const keys: WorkerKey[] = [];
  const indexOf = new Map<WorkerKey, number>();
  for (let w = 0; w < workers; w++) {
    const info = registry.upsert({
      workerId: `sim-${w}`,
      url: `http://127.0.0.1:${18000 + w}`,
      metricsUrl: null,
      kind: "vllm",
      blockSize,
      numGpuBlocks: capacityBlocks,
    });
    keys.push(info.key);
    indexOf.set(info.key, w);
  }
  return { registry, keys, indexOf };
}
