/**
 * Dynamo's `ForwardPassMetrics` (ai-dynamo/dynamo, lib/llm/src/kv_router/protocols.rs,
 * read 2026-11-23: `worker_stats` {data_parallel_rank, request_active_slots,
 * request_total_slots, num_requests_waiting} and `kv_stats` {kv_active_blocks,
 * kv_total_blocks, gpu_cache_usage_perc, gpu_prefix_cache_hit_rate}) as a pushed load
 * report, nested as Dynamo serialises it or flattened, turned into the router's own load
 * fields. Pure: the HTTP route checks shapes and calls this for the rules between fields.
 */

/** The fields of both halves, flattened (nested bodies are flattened by the caller). */
export interface ForwardPassMetricsFields {
  readonly data_parallel_rank?: number | null;
  readonly request_active_slots?: number;
  readonly request_total_slots?: number;
  readonly num_requests_waiting?: number;
  readonly kv_active_blocks?: number;
  readonly kv_total_blocks?: number;
  readonly gpu_cache_usage_perc?: number;
  readonly gpu_prefix_cache_hit_rate?: number;
}

export const FORWARD_PASS_WORKER_FIELDS = [
  "data_parallel_rank",
  "request_active_slots",
  "request_total_slots",
  "num_requests_waiting",
] as const;

export const FORWARD_PASS_KV_FIELDS = [
  "kv_active_blocks",
  "kv_total_blocks",
  "gpu_cache_usage_perc",
  "gpu_prefix_cache_hit_rate",
] as const;

/** The router's load fields (a `LoadSnapshot` without its time). */
export interface PushedLoad {
  readonly running: number;
  readonly waiting: number;
  readonly kvUsage: number;
  readonly numGpuBlocks?: number;
  readonly prefixCacheHitRate?: number;
}

export type ForwardPassResult =
  | { readonly ok: true; readonly load: PushedLoad; readonly dpRank: number | null }
  /** `field` is the offending field's name (the caller turns it into a path). */
  | { readonly ok: false; readonly field: string; readonly message: string };

/**
 * running = `request_active_slots`, waiting = `num_requests_waiting`, KV usage =
 * `gpu_cache_usage_perc`, else `kv_active_blocks / kv_total_blocks`; `kv_total_blocks`
 * is the GPU capacity, `gpu_prefix_cache_hit_rate` the engine's hit rate.
 * `request_total_slots` is accepted and not used (the scheduler has no slot cap).
 */
export function loadFromForwardPassMetrics(m: ForwardPassMetricsFields): ForwardPassResult {
  const fail = (field: string, message: string): ForwardPassResult => ({
    ok: false,
    field,
    message,
  });
  if (m.request_active_slots === undefined) {
    return fail("request_active_slots", "is required in a ForwardPassMetrics body");
  }
  if (m.num_requests_waiting === undefined) {
    return fail("num_requests_waiting", "is required in a ForwardPassMetrics body");
  }
  let kvUsage = m.gpu_cache_usage_perc;
  const total = m.kv_total_blocks;
  const active = m.kv_active_blocks;
  if (total !== undefined && active !== undefined && active > total) {
    return fail("kv_active_blocks", `is ${active}, more than kv_total_blocks ${total}`);
  }
  if (kvUsage === undefined) {
    if (active === undefined || total === undefined) {
      return fail(
        "gpu_cache_usage_perc",
        "is required unless both kv_active_blocks and kv_total_blocks are sent",
      );
    }
    if (total === 0) return fail("kv_total_blocks", "is 0: KV usage cannot be computed");
    kvUsage = active / total;
  }
  return {
    ok: true,
    dpRank: m.data_parallel_rank ?? null,
    load: {
      running: m.request_active_slots,
      waiting: m.num_requests_waiting,
      kvUsage,
      ...(total === undefined || total < 1 ? {} : { numGpuBlocks: total }),
      ...(m.gpu_prefix_cache_hit_rate === undefined
        ? {}
        : { prefixCacheHitRate: m.gpu_prefix_cache_hit_rate }),
    },
  };
}
