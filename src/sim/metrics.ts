/**
 * Prometheus text for the simulated worker, with vLLM's current metric names and labels
 * (`model_name`, `engine`; wire-formats §6), so the router's scraper reads it exactly as it
 * reads a real engine. Written by hand: a handful of series, no registry needed.
 */

import type { EngineCounters } from "./engine.js";
import type { KvCacheStats } from "./kv-cache.js";

/** vLLM's TTFT histogram buckets, in seconds. */
const TTFT_BUCKETS = [
  0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
  40.0, 80.0, 160.0, 640.0, 2560.0,
];

export interface CacheInfo {
  readonly blockSize: number;
  readonly numGpuBlocks: number;
}

/** Everything a scrape reports, read at scrape time. */
export interface MetricsSnapshot {
  readonly engine: EngineCounters;
  readonly cache: KvCacheStats;
  /** 0–1. */
  readonly kvUsage: number;
  readonly requestSuccess: number;
}

/** Python's float repr for the values we print (integers as "12.0"). */
function num(v: number): string {
  if (Number.isInteger(v)) return `${v}.0`;
  return String(v);
}

function escapeLabel(v: string): string {
  return v.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"');
}

export class SimMetrics {
  readonly #labels: string;
  readonly #cacheInfo: string;
  readonly #ttftCounts = new Array<number>(TTFT_BUCKETS.length).fill(0);
  #ttftSum = 0;
  #ttftCount = 0;

  constructor(modelName: string, engineIndex: number, info: CacheInfo) {
    this.#labels = `engine="${engineIndex}",model_name="${escapeLabel(modelName)}"`;
    this.#cacheInfo = [
      `block_size="${info.blockSize}"`,
      `cache_dtype="auto"`,
      `enable_prefix_caching="True"`,
      `engine="${engineIndex}"`,
      `gpu_memory_utilization="0.9"`,
      `num_cpu_blocks="None"`,
      `num_gpu_blocks="${info.numGpuBlocks}"`,
      `prefix_caching_hash_algo="sha256_cbor"`,
    ].join(",");
  }

  /** Record one request's time to first token. */
  observeTtft(seconds: number): void {
    for (let i = 0; i < TTFT_BUCKETS.length; i++) {
      if (seconds <= TTFT_BUCKETS[i]!) this.#ttftCounts[i]!++;
    }
    this.#ttftSum += seconds;
    this.#ttftCount++;
  }

  /** The exposition text (`text/plain; version=0.0.4`). */
  render(s: MetricsSnapshot): string {
    const L = this.#labels;
    const out: string[] = [];
    const gauge = (name: string, help: string, value: number) => {
      out.push(`# HELP ${name} ${help}`, `# TYPE ${name} gauge`, `${name}{${L}} ${num(value)}`);
    };
    const counter = (name: string, help: string, value: number) => {
      out.push(
        `# HELP ${name} ${help}`,
        `# TYPE ${name} counter`,
        `${name}_total{${L}} ${num(value)}`,
      );
    };
    gauge(
      "vllm:num_requests_running",
      "Number of requests in model execution batches.",
      s.engine.running,
    );
    gauge(
      "vllm:num_requests_waiting",
      "Number of requests waiting to be processed.",
      s.engine.waiting,
    );
    gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", s.kvUsage);
    counter(
      "vllm:prefix_cache_queries",
      "Prefix cache queries, in terms of number of queried tokens.",
      s.cache.queries,
    );
    counter(
      "vllm:prefix_cache_hits",
      "Prefix cache hits, in terms of number of cached tokens.",
      s.cache.hits,
    );
    counter(
      "vllm:num_preemptions",
      "Cumulative number of preemption from the engine.",
      s.engine.preemptions,
    );
    counter("vllm:prompt_tokens", "Number of prefill tokens processed.", s.engine.promptTokens);
    counter(
      "vllm:generation_tokens",
      "Number of generation tokens processed.",
      s.engine.generationTokens,
    );
    out.push(
      "# HELP vllm:request_success Count of successfully processed requests.",
      "# TYPE vllm:request_success counter",
      `vllm:request_success_total{${L},finished_reason="length"} ${num(s.requestSuccess)}`,
    );
    out.push(
      "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig",
      "# TYPE vllm:cache_config_info gauge",
      `vllm:cache_config_info{${this.#cacheInfo}} 1.0`,
    );
    const h = "vllm:time_to_first_token_seconds";
    out.push(`# HELP ${h} Histogram of time to first token in seconds.`, `# TYPE ${h} histogram`);
    for (let i = 0; i < TTFT_BUCKETS.length; i++) {
      out.push(`${h}_bucket{${L},le="${num(TTFT_BUCKETS[i]!)}"} ${num(this.#ttftCounts[i]!)}`);
    }
    out.push(`${h}_bucket{${L},le="+Inf"} ${num(this.#ttftCount)}`);
    out.push(`${h}_count{${L}} ${num(this.#ttftCount)}`, `${h}_sum{${L}} ${num(this.#ttftSum)}`);
    return `${out.join("\n")}\n`;
  }
}
