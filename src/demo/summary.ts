/**
 * The demo's figures: per policy, the prefix hit rate the workers reported, client-side
 * time to first token, and how the requests spread over the workers; then both policies
 * side by side as a table. Pure functions over the phase results.
 */

import type { PhaseResult, Policy } from "./run-phase.js";

export interface PolicySummary {
  readonly policy: Policy;
  readonly requests: number;
  readonly errors: number;
  readonly promptTokens: number;
  readonly cachedTokens: number;
  /** cachedTokens / promptTokens, from the workers' usage. */
  readonly hitRate: number;
  readonly ttftMeanMs: number;
  readonly ttftP50Ms: number;
  readonly ttftP99Ms: number;
  readonly e2eMeanMs: number;
  /** Requests per worker id, every worker listed (0 when it got none). */
  readonly requestsPerWorker: Readonly<Record<string, number>>;
  /** Mean duration of `POST /v1/route` (kv only). */
  readonly routeMeanMs: number | null;
  /** Cached tokens the router expected / prompt tokens (kv only). */
  readonly predictedHitRate: number | null;
  readonly wallMs: number;
}

const sum = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0);
const mean = (xs: readonly number[]) => (xs.length === 0 ? 0 : sum(xs) / xs.length);

/** Nearest-rank percentile (`q` in (0, 1]); 0 for no data. */
export function percentile(xs: readonly number[], q: number): number {
  if (xs.length === 0) return 0;
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length, Math.max(1, Math.ceil(q * sorted.length))) - 1]!;
}

/** Figures of one phase; `workerIds` fixes the order and lists idle workers too. */
export function summarise(result: PhaseResult, workerIds: readonly string[]): PolicySummary {
  const r = result.records;
  const promptTokens = sum(r.map((x) => x.promptTokens));
  const cachedTokens = sum(r.map((x) => x.cachedTokens));
  const ttft = r.map((x) => x.ttftMs);
  const perWorker: Record<string, number> = Object.fromEntries(workerIds.map((id) => [id, 0]));
  for (const x of r) perWorker[x.worker] = (perWorker[x.worker] ?? 0) + 1;
  const routed = r.filter((x) => x.routeMs !== null);
  const predicted = r.filter((x) => x.predictedCachedTokens !== null);
  return {
    policy: result.policy,
    requests: r.length,
    errors: result.errors.length,
    promptTokens,
    cachedTokens,
    hitRate: promptTokens === 0 ? 0 : cachedTokens / promptTokens,
    ttftMeanMs: mean(ttft),
    ttftP50Ms: percentile(ttft, 0.5),
    ttftP99Ms: percentile(ttft, 0.99),
    e2eMeanMs: mean(r.map((x) => x.e2eMs)),
    requestsPerWorker: perWorker,
    routeMeanMs: routed.length === 0 ? null : mean(routed.map((x) => x.routeMs ?? 0)),
    predictedHitRate:
      predicted.length === 0 || promptTokens === 0
        ? null
        : sum(predicted.map((x) => x.predictedCachedTokens ?? 0)) / promptTokens,
    wallMs: result.wallMs,
  };
}

const pct = (x: number) => `${(100 * x).toFixed(1)} %`;
const ms = (x: number) => `${x.toFixed(x < 10 ? 1 : 0)} ms`;

/** The side-by-side table (kv-aware first). */
export function formatComparison(kv: PolicySummary, rr: PolicySummary): string {
  const rows: [string, string, string][] = [
    ["", "kv-aware", "round-robin"],
    ["prefix hit rate (cached / prompt tokens)", pct(kv.hitRate), pct(rr.hitRate)],
    ["TTFT mean", ms(kv.ttftMeanMs), ms(rr.ttftMeanMs)],
    ["TTFT p50", ms(kv.ttftP50Ms), ms(rr.ttftP50Ms)],
    ["TTFT p99", ms(kv.ttftP99Ms), ms(rr.ttftP99Ms)],
    ["request latency mean", ms(kv.e2eMeanMs), ms(rr.e2eMeanMs)],
  ];
  for (const id of Object.keys(kv.requestsPerWorker)) {
    rows.push([
      `requests on ${id}`,
      String(kv.requestsPerWorker[id] ?? 0),
      String(rr.requestsPerWorker[id] ?? 0),
    ]);
  }
  rows.push(
    ["requests (errors)", `${kv.requests} (${kv.errors})`, `${rr.requests} (${rr.errors})`],
    [
      "router's predicted hit rate",
      kv.predictedHitRate === null ? "-" : pct(kv.predictedHitRate),
      "-",
    ],
    ["phase wall time", `${(kv.wallMs / 1000).toFixed(1)} s`, `${(rr.wallMs / 1000).toFixed(1)} s`],
  );
  const w0 = Math.max(...rows.map((r) => r[0].length));
  const w1 = Math.max(...rows.map((r) => r[1].length));
  const w2 = Math.max(...rows.map((r) => r[2].length));
  return rows
    .map(([a, b, c]) => `  ${a.padEnd(w0)}  ${b.padStart(w1)}  ${c.padStart(w2)}`)
    .join("\n");
}

/**
 * The gateway's prediction check over the kv phase, from kvrouter's `/metrics` (the one
 * warm-up request the demo sends through the gateway before it counts too).
 */
export interface PredictionCheckSummary {
  readonly match: number;
  readonly over: number;
  readonly under: number;
  readonly warnings: number;
}

/** Sum `kvrouter_gateway_prediction_*` samples of a Prometheus text by outcome. */
export function predictionCheckOf(metricsText: string): PredictionCheckSummary {
  const out = { match: 0, over: 0, under: 0, warnings: 0 };
  for (const line of metricsText.split("\n")) {
    const value = Number(line.slice(line.lastIndexOf(" ") + 1));
    if (line.startsWith("kvrouter_gateway_prediction_checks_total{")) {
      const m = /outcome="(match|over|under)"/.exec(line);
      if (m !== null) out[m[1] as "match" | "over" | "under"] += value;
    } else if (line.startsWith("kvrouter_gateway_prediction_warnings_total{")) {
      out.warnings += value;
    }
  }
  return out;
}

export function formatPredictionCheck(p: PredictionCheckSummary): string {
  const n = p.match + p.over + p.under;
  return (
    `  prediction check (engine's cached tokens vs the router's prediction, kv phase and the warm-up request): ` +
    `${p.match} of ${n} within one block, ${p.over} over, ${p.under} under, ${p.warnings} warning(s)`
  );
}
