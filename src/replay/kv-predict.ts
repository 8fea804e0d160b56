/**
 * Predict-on-route and the degraded-mode fallback in the replay (`--predict-ttl-ms`,
 * `--fallback`, `--fault`): the kv policy's side of them. Faults are injected on the
 * router's side of the event path, as the service would see them:
 * - `gap:W@S`: at S seconds worker W's stream loses its batches for 1 s and cannot replay
 *   them: the router clears W's index entries (an `unfilled_gap` reset) and never hears
 *   of the blocks stored meanwhile, while the engine keeps its cache;
 * - `silent:W@S`: from S seconds on, W's publisher sends nothing (the engine serves on).
 * The health check (`StreamHealth`) runs every second of virtual time on what the
 * router can observe; `PredictedBlocks` holds both the predictions and the approximate
 * view. Counts what the router claimed against what the engine served (over-claims),
 * and counts the claims beyond the index on healthy workers (`beyondIndexWhileHealthy`:
 * with `--predict-ttl-ms 0` any predicted block there is a leftover of degraded mode, the
 * false positive the fallback must not leave), apart from the index's own over-claims (an
 * eviction between the decision and admission).
 */

import { FIELDS } from "../config/fields.js";
import { PredictedBlocks } from "../predict/predicted-blocks.js";
import { StreamHealth } from "../predict/stream-health.js";
import type { KvEvent } from "../protocol/events.js";
import type { WorkerKey } from "../protocol/worker.js";

export interface ReplayFault {
  readonly kind: "gap" | "silent";
  readonly worker: number;
  readonly atMs: number;
}

export interface KvPredictOptions {
  /** Predict-on-route TTL (ms); 0 = off. */
  readonly ttlMs: number;
  /** Switch workers with a broken stream to the approximate view. */
  readonly fallback: boolean;
  readonly faults: readonly ReplayFault[];
  /** Entry lifetime in degraded mode (ms). */
  readonly degradedTtlMs: number;
}

/**
 * The `kv` policy's prediction settings when none are given: the service's defaults for
 * predict-on-route (`predict.ttlMs`, 2 s), no fallback (it changes nothing on a healthy
 * fleet) and no faults.
 */
export const SERVICE_PREDICT: KvPredictOptions = {
  ttlMs: FIELDS.predict.ttlMs.default,
  fallback: false,
  faults: [],
  degradedTtlMs: FIELDS.predict.degradedTtlMs.default,
};

/** Lost-batch window of an injected gap. */
const GAP_MS = 1000;
const HEALTH_PERIOD_MS = 1000;

/** Parse `gap:3@120` / `silent:0@60` (worker index, seconds). */
export function parseFault(s: string, workers: number): ReplayFault | string {
  const m = /^(gap|silent):(\d+)@(\d+(?:\.\d+)?)$/.exec(s.trim());
  if (m === null) return `expected KIND:WORKER@SECONDS with KIND gap or silent, got '${s}'`;
  const worker = Number(m[2]);
  if (worker >= workers) return `worker ${worker} is not in a fleet of ${workers}`;
  return { kind: m[1] as "gap" | "silent", worker, atMs: Number(m[3]) * 1000 };
}

export interface KvPredictStats {
  /** Routes whose chosen worker had predicted blocks past what its index reported. */
  predictedRoutes: number;
  degradedRoutes: number;
  degradedEntries: number;
  /** Routes whose claimed cached tokens exceeded what the engine served (false positives). */
  overclaims: number;
  overclaimsWhileHealthy: number;
  /**
   * Routes to a healthy worker whose claim exceeded the index's report (predicted blocks
   * counted). With `ttlMs` 0 every one is a leftover of the approximate view.
   */
  beyondIndexWhileHealthy: number;
  /** Those of them that claimed more than the engine then served. */
  overclaimsFromViewWhileHealthy: number;
  overclaimedTokens: number;
  droppedEvents: number;
  /** Returns of a degraded worker to precise routing. */
  recoveries: number;
}

export class KvPredict {
  readonly predicted: PredictedBlocks;
  readonly #o: KvPredictOptions;
  readonly #keys: readonly WorkerKey[];
  readonly #capacity: number;
  readonly #health = new StreamHealth();
  readonly #pending: ReplayFault[];
  readonly #gapUntil: number[];
  readonly #silentFrom: number[];
  readonly #lossResets: number[];
  readonly #lastEvent: (number | null)[];
  readonly #applied: number[];
  readonly #missing: number[];
  readonly #claims = new Map<number, { tokens: number; degraded: boolean; fromView: boolean }>();
  #nextHealthMs = 0;
  readonly stats: KvPredictStats = {
    predictedRoutes: 0,
    degradedRoutes: 0,
    degradedEntries: 0,
    overclaims: 0,
    overclaimsWhileHealthy: 0,
    beyondIndexWhileHealthy: 0,
    overclaimsFromViewWhileHealthy: 0,
    overclaimedTokens: 0,
    droppedEvents: 0,
    recoveries: 0,
  };

  constructor(o: KvPredictOptions, keys: readonly WorkerKey[], capacityBlocks: number) {
    this.#o = o;
    this.#keys = keys;
    this.#capacity = capacityBlocks;
    this.predicted = new PredictedBlocks({
      ttlMs: o.ttlMs,
      maxBlocksPerWorker: capacityBlocks,
      degradedTtlMs: o.degradedTtlMs,
    });
    this.#pending = [...o.faults].sort((a, b) => a.atMs - b.atMs);
    const n = keys.length;
    this.#gapUntil = new Array(n).fill(Number.NEGATIVE_INFINITY);
    this.#silentFrom = new Array(n).fill(Number.POSITIVE_INFINITY);
    this.#lossResets = new Array(n).fill(0);
    this.#lastEvent = new Array(n).fill(null);
    this.#applied = new Array(n).fill(0);
    this.#missing = new Array(n).fill(0);
  }

  /** Advance faults and the health check to `nowMs`; `clear` drops a worker's index entries. */
  tick(nowMs: number, clear: (key: WorkerKey) => void): void {
    while (this.#pending.length > 0 && this.#pending[0]!.atMs <= nowMs) {
      const f = this.#pending.shift()!;
      if (f.kind === "gap") {
        this.#gapUntil[f.worker] = f.atMs + GAP_MS;
        this.#lossResets[f.worker]!++;
        clear(this.#keys[f.worker]!);
      } else this.#silentFrom[f.worker] = f.atMs;
    }
    if (!this.#o.fallback || nowMs < this.#nextHealthMs) return;
    this.#nextHealthMs = nowMs + HEALTH_PERIOD_MS;
    for (let w = 0; w < this.#keys.length; w++) {
      const key = this.#keys[w]!;
      const v = this.#health.observe(
        {
          worker: key,
          lossResets: this.#lossResets[w]!,
          decodeErrors: 0,
          lastEventTimeMs: this.#lastEvent[w]!,
          storedApplied: this.#applied[w]!,
          storedParentMissing: this.#missing[w]!,
        },
        this.predicted.routed(key),
        nowMs,
      );
      if (!v.changed) continue;
      if (v.reason !== null) {
        this.predicted.setDegraded(key, this.#capacity);
        this.stats.degradedEntries++;
      } else {
        this.predicted.setHealthy(key);
        this.stats.recoveries++;
      }
    }
  }

  /** Whether worker w's event reaches the router (false: lost to an injected fault). */
  delivers(w: number, eventMs: number): boolean {
    if (eventMs < this.#gapUntil[w]! || eventMs >= this.#silentFrom[w]!) {
      this.stats.droppedEvents++;
      return false;
    }
    this.#lastEvent[w] = eventMs;
    return true;
  }

  /** Count an event's apply outcome (the health check reads stored ones). */
  counted(w: number, event: KvEvent, status: string): void {
    if (event.type !== "stored") return;
    if (status === "applied") this.#applied[w]!++;
    else if (status === "parent_not_found") this.#missing[w]!++;
  }

  /**
   * A decision: remember what it claimed, to check against what the engine serves.
   * `reportedBlocks` is the index's own overlap for the chosen worker.
   */
  routed(
    index: number,
    key: WorkerKey,
    cachedTokens: number,
    predictedBlocks: number,
    reportedBlocks: number,
  ): void {
    const degraded = this.predicted.isDegraded(key);
    if (predictedBlocks > 0) this.stats.predictedRoutes++;
    if (degraded) this.stats.degradedRoutes++;
    else if (predictedBlocks > reportedBlocks) this.stats.beyondIndexWhileHealthy++;
    this.#claims.set(index, {
      tokens: cachedTokens,
      degraded,
      fromView: predictedBlocks > reportedBlocks,
    });
  }

  /** The engine served `hitTokens` of request `index` from its cache. */
  served(index: number, hitTokens: number): void {
    const c = this.#claims.get(index);
    if (c === undefined) return;
    this.#claims.delete(index);
    if (c.tokens > hitTokens) {
      this.stats.overclaims++;
      if (!c.degraded) this.stats.overclaimsWhileHealthy++;
      if (!c.degraded && c.fromView) this.stats.overclaimsFromViewWhileHealthy++;
      this.stats.overclaimedTokens += c.tokens - hitTokens;
    }
  }
}
