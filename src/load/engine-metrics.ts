/**
 * From an engine's /metrics exposition to a load snapshot, across engine versions:
 *
 * | meaning       | vLLM (current)                   | vLLM ≤ 0.10                        | SGLang                  |
 * |---------------|----------------------------------|------------------------------------|-------------------------|
 * | running       | vllm:num_requests_running        | same                               | sglang:num_running_reqs |
 * | waiting       | vllm:num_requests_waiting        | same                               | sglang:num_queue_reqs   |
 * | KV usage 0..1 | vllm:kv_cache_usage_perc         | vllm:gpu_cache_usage_perc          | sglang:token_usage      |
 * | prefix cache  | vllm:prefix_cache_{queries,hits} | vllm:gpu_prefix_cache_{queries,hits} | sglang:cache_hit_rate |
 * | capacity      | vllm:cache_config_info labels    | same                               | sglang:max_total_num_tokens |
 *
 * One exposition can hold several series of a metric: vLLM serves one per `engine`
 * (data-parallel rank) and `model_name`; SGLang labels `dp_rank`, `tp_rank`, … The
 * series rule (also in docs/load.md): keep the worker's model if present; keep the
 * worker's rank (`engine` / `dp_rank`) if present; keep the lowest tp/pp/ep rank present
 * (rank 0, or the first of the DP rank's group under SGLang's DP attention); then sum
 * counts and counters and average fractions.
 */

import type { PromParseResult, PromSample } from "./prometheus-text.js";
import { parsePrometheusText } from "./prometheus-text.js";
import type { EngineLoad, WorkerKind } from "./types.js";

/** Which worker an exposition is read for. */
export interface EngineMetricsTarget {
  readonly kind: WorkerKind;
  /** Served model name; null = any. */
  readonly model: string | null;
  readonly dpRank: number;
  /** Tokens per block, to turn SGLang's token capacity into blocks. */
  readonly blockSize: number;
}

export type EngineLoadResult =
  | { readonly ok: true; readonly load: EngineLoad; readonly notes: readonly string[] }
  | { readonly ok: false; readonly error: string };

const RUNNING = ["vllm:num_requests_running", "sglang:num_running_reqs"];
const WAITING = ["vllm:num_requests_waiting", "sglang:num_queue_reqs"];
const KV_USAGE = ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage"];
const QUERIES = [
  "vllm:prefix_cache_queries_total",
  "vllm:prefix_cache_queries",
  "vllm:gpu_prefix_cache_queries_total",
  "vllm:gpu_prefix_cache_queries",
];
const HITS = [
  "vllm:prefix_cache_hits_total",
  "vllm:prefix_cache_hits",
  "vllm:gpu_prefix_cache_hits_total",
  "vllm:gpu_prefix_cache_hits",
];
const HIT_RATE = ["sglang:cache_hit_rate", "vllm:gpu_prefix_cache_hit_rate"];
const CACHE_INFO = "vllm:cache_config_info";
const SGLANG_MAX_TOKENS = "sglang:max_total_num_tokens";

/** Every metric name this module reads (lets the parser skip the rest). */
export const ENGINE_METRIC_NAMES: ReadonlySet<string> = new Set([
  ...RUNNING,
  ...WAITING,
  ...KV_USAGE,
  ...QUERIES,
  ...HITS,
  ...HIT_RATE,
  CACHE_INFO,
  SGLANG_MAX_TOKENS,
]);

const RANK_LABELS = ["engine", "dp_rank"];
const SUB_RANK_LABELS = ["tp_rank", "pp_rank", "moe_ep_rank", "attn_tp_rank"];

/** KV usage up to this is clamped to 1 (rounding); above it the scrape fails. */
export const KV_USAGE_CLAMP_LIMIT = 1.5;

/** Parse an exposition and extract the target's load. Never throws. */
export function parseEngineMetrics(text: string, target: EngineMetricsTarget): EngineLoadResult {
  return engineLoadOf(parseEngineExposition(text), target);
}

/** The lines of an exposition this module reads, parsed once for every rank it serves. */
export function parseEngineExposition(text: string): PromParseResult {
  return parsePrometheusText(text, { names: ENGINE_METRIC_NAMES });
}

/**
 * The target's load from a parsed exposition (`parseEngineExposition`), with a note on
 * the lines skipped. Reads `parsed` only: several ranks may share one.
 */
export function engineLoadOf(
  parsed: PromParseResult,
  target: EngineMetricsTarget,
): EngineLoadResult {
  const result = engineLoadFromSamples(parsed, target);
  if (!result.ok || parsed.issues.length === 0) return result;
  const first = parsed.issues[0]!;
  return {
    ...result,
    notes: [
      ...result.notes,
      `${parsed.issues.length} bad line(s) skipped, first at line ${first.line}: ${first.message}`,
    ],
  };
}

/** Extract the target's load from parsed samples. */
export function engineLoadFromSamples(
  parsed: PromParseResult,
  target: EngineMetricsTarget,
): EngineLoadResult {
  const notes: string[] = [];
  const pick = (names: readonly string[]): readonly PromSample[] | null => {
    for (const n of names) {
      const s = parsed.samples.get(n);
      if (s !== undefined && s.length > 0) return selectSeries(s, target, notes, n);
    }
    return null;
  };
  const running = pick(RUNNING);
  const waiting = pick(WAITING);
  const usage = pick(KV_USAGE);
  const missing = [
    running === null ? "running requests" : null,
    waiting === null ? "waiting requests" : null,
    usage === null ? "KV cache usage" : null,
  ].filter((m) => m !== null);
  if (missing.length > 0) {
    return {
      ok: false,
      error: `no ${target.kind} load metrics for ${missing.join(", ")} in the exposition`,
    };
  }
  const r = sum(running!);
  const w = sum(waiting!);
  let kv = mean(usage!);
  if (!(r >= 0) || !(w >= 0) || !(kv >= 0) || !Number.isFinite(r + w + kv)) {
    return { ok: false, error: `invalid load values: running=${r} waiting=${w} kvUsage=${kv}` };
  }
  if (kv > KV_USAGE_CLAMP_LIMIT) {
    // Not rounding noise: most likely a percentage (85 for 85 %). Reading it as "full"
    // would silently take the worker out; failing the scrape counts and logs it instead.
    return {
      ok: false,
      error: `KV cache usage ${kv} is not a fraction in 0..1 (a percentage?)`,
    };
  }
  if (kv > 1) {
    notes.push(`KV usage ${kv} above 1, clamped`);
    kv = 1;
  }
  const load: {
    -readonly [K in keyof EngineLoad]: EngineLoad[K];
  } = { running: r, waiting: w, kvUsage: kv };
  const q = pick(QUERIES);
  const h = pick(HITS);
  if (q !== null && h !== null) {
    const qs = sum(q);
    const hs = sum(h);
    if (qs >= 0 && hs >= 0 && Number.isFinite(qs + hs)) {
      load.prefixCacheQueries = qs;
      load.prefixCacheHits = hs;
    }
  }
  const rate = pick(HIT_RATE);
  if (rate !== null) {
    const v = mean(rate);
    if (v >= 0 && v <= 1) load.prefixCacheHitRate = v;
  }
  const info = pick([CACHE_INFO]);
  if (info !== null) {
    const labels = info[0]!.labels;
    const bs = positiveInt(labels.block_size);
    const nb = positiveInt(labels.num_gpu_blocks);
    if (bs !== undefined) load.blockSize = bs;
    if (nb !== undefined) load.numGpuBlocks = nb;
  }
  const maxTokens = pick([SGLANG_MAX_TOKENS]);
  if (maxTokens !== null && load.numGpuBlocks === undefined) {
    const tokens = sum(maxTokens);
    if (tokens > 0 && Number.isFinite(tokens))
      load.numGpuBlocks = Math.floor(tokens / target.blockSize);
  }
  return { ok: true, load, notes };
}

/** The series rule described in the header. */
export function selectSeries(
  samples: readonly PromSample[],
  target: EngineMetricsTarget,
  notes: string[],
  name: string,
): readonly PromSample[] {
  let s = samples;
  if (target.model !== null) {
    const m = s.filter((x) => (x.labels.model_name ?? x.labels.name) === target.model);
    if (m.length > 0) s = m;
  }
  for (const label of RANK_LABELS) {
    const labelled = s.filter((x) => x.labels[label] !== undefined);
    if (labelled.length === 0) continue;
    const mine = labelled.filter((x) => x.labels[label] === String(target.dpRank));
    if (mine.length > 0) {
      s = mine;
    } else {
      const distinct = new Set(labelled.map((x) => x.labels[label]));
      if (distinct.size > 1)
        notes.push(`${name}: no series with ${label}=${target.dpRank}; combined ${distinct.size}`);
    }
    break;
  }
  // The lowest sub-rank present, not rank 0: under SGLang's DP attention the schedulers
  // of DP rank d are TP ranks d·attn_tp … (d+1)·attn_tp − 1, so only rank 0 has a
  // `tp_rank="0"` series, and keeping "all" for the others counted them attn_tp times.
  for (const label of SUB_RANK_LABELS) {
    const lowest = lowestRank(s, label);
    if (lowest !== null)
      s = s.filter((x) => x.labels[label] === undefined || x.labels[label] === lowest);
  }
  return s;
}

/** The smallest integer value of `label` among the series (as written), or null if none. */
function lowestRank(s: readonly PromSample[], label: string): string | null {
  let best: string | null = null;
  let bestN = Number.POSITIVE_INFINITY;
  for (const x of s) {
    const v = x.labels[label];
    if (v === undefined || !/^\d+$/.test(v)) continue;
    const n = Number(v);
    if (n < bestN) {
      bestN = n;
      best = v;
    }
  }
  return best;
}

function sum(s: readonly PromSample[]): number {
  let t = 0;
  for (const x of s) t += x.value;
  return t;
}

function mean(s: readonly PromSample[]): number {
  return sum(s) / s.length;
}

function positiveInt(v: string | undefined): number | undefined {
  if (v === undefined || !/^\d+$/.test(v)) return undefined;
  const n = Number(v);
  return n > 0 ? n : undefined;
}
