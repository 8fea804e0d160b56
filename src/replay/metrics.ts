/**
 * Figures of one replay run: prefix hit rate, prefill work, latency and balance.
 * Computed once from the request outcomes and the fleet's per-worker counters.
 */

import type { RequestOutcome, WorkerStats } from "./sim-fleet.js";

export interface LatencySummary {
  readonly mean: number;
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
  readonly max: number;
}

export interface RunSummary {
  readonly policy: string;
  readonly workers: number;
  readonly requests: number;
  /** Requests whose prompt could never fit a worker's cache (dropped, not in latencies). */
  readonly rejected: number;
  readonly inputTokens: number;
  /** Prompt tokens served from prefix caches. */
  readonly hitTokens: number;
  /** hitTokens / inputTokens of the served requests. */
  readonly hitRate: number;
  /** Prompt tokens computed (inputTokens − hitTokens). */
  readonly prefillTokens: number;
  /** Time to first token, ms. */
  readonly ttftMs: LatencySummary;
  /** Arrival to last token, ms. */
  readonly e2eMs: LatencySummary;
  /** max / mean of prefill tokens per worker (1 = perfectly even). */
  readonly loadImbalance: number;
  /** Prefill busy time / (workers × span from first arrival to last prefill end). */
  readonly prefillUtilisation: number;
  readonly perWorkerPrefillTokens: readonly number[];
  /** Virtual time from the first arrival to the last completion, ms. */
  readonly makespanMs: number;
}

/** Nearest-rank percentile of an ascending array (p in 0..100). */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

/** Summary of a set of latencies (any order). */
export function summariseLatency(values: readonly number[]): LatencySummary {
  const sorted = Float64Array.from(values).sort();
  let sum = 0;
  for (const v of sorted) sum += v;
  return {
    mean: sorted.length === 0 ? Number.NaN : sum / sorted.length,
    p50: percentile(sorted, 50),
    p90: percentile(sorted, 90),
    p99: percentile(sorted, 99),
    max: sorted.length === 0 ? Number.NaN : sorted[sorted.length - 1]!,
  };
}

/** max / mean of a list of non-negative numbers; 1 when all are zero. */
export function imbalance(values: readonly number[]): number {
  if (values.length === 0) return 1;
  let sum = 0;
  let max = 0;
  for (const v of values) {
    sum += v;
    if (v > max) max = v;
  }
  return sum === 0 ? 1 : max / (sum / values.length);
}

/** TTFTs (ms) of the served requests, ascending: the data of the CDF plot. */
export function ttftSorted(outcomes: readonly RequestOutcome[]): Float64Array {
  const v: number[] = [];
  for (const o of outcomes) if (!o.rejected) v.push(o.firstTokenMs - o.arrivalMs);
  return Float64Array.from(v).sort();
}

export function summariseRun(
  policy: string,
  outcomes: readonly RequestOutcome[],
  workerStats: readonly Readonly<WorkerStats>[],
): RunSummary {
  let inputTokens = 0;
  let hitTokens = 0;
  let rejected = 0;
  let first = Number.POSITIVE_INFINITY;
  let last = Number.NEGATIVE_INFINITY;
  const ttft: number[] = [];
  const e2e: number[] = [];
  for (const o of outcomes) {
    if (o.arrivalMs < first) first = o.arrivalMs;
    if (o.rejected) {
      rejected++;
      continue;
    }
    if (Number.isNaN(o.doneMs)) throw new Error(`request ${o.index} never finished`);
    inputTokens += o.inputTokens;
    hitTokens += o.hitTokens;
    ttft.push(o.firstTokenMs - o.arrivalMs);
    e2e.push(o.doneMs - o.arrivalMs);
    if (o.doneMs > last) last = o.doneMs;
  }
  const perWorker = workerStats.map((s) => s.prefillTokens);
  let busy = 0;
  let lastPrefill = first;
  for (const s of workerStats) {
    busy += s.prefillBusyMs;
    if (s.lastPrefillEndMs > lastPrefill) lastPrefill = s.lastPrefillEndMs;
  }
  const span = lastPrefill - first;
  return {
    policy,
    workers: workerStats.length,
    requests: outcomes.length,
    rejected,
    inputTokens,
    hitTokens,
    hitRate: inputTokens === 0 ? 0 : hitTokens / inputTokens,
    prefillTokens: inputTokens - hitTokens,
    ttftMs: summariseLatency(ttft),
    e2eMs: summariseLatency(e2e),
    loadImbalance: imbalance(perWorker),
    prefillUtilisation: span > 0 ? busy / (workerStats.length * span) : 0,
    perWorkerPrefillTokens: perWorker,
    makespanMs: Number.isFinite(last) ? last - first : 0,
  };
}
