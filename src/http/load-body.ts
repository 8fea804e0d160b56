/**
 * The two accepted bodies of `PUT /v1/workers/:id/load`, told apart and turned into the
 * router's load fields: ours (`running`, `waiting`, `kv_usage`, …) or Dynamo's
 * `ForwardPassMetrics` (flat, or nested in `worker_stats` / `kv_stats`). Mixing the two
 * is refused: which one to believe would be a guess.
 */

import {
  FORWARD_PASS_KV_FIELDS,
  FORWARD_PASS_WORKER_FIELDS,
  type ForwardPassMetricsFields,
  loadFromForwardPassMetrics,
  type PushedLoad,
} from "../load/forward-pass-metrics.js";
import { ApiError } from "./errors.js";
import type { PushLoadBody } from "./schemas.js";

export interface PushedLoadReport {
  readonly load: PushedLoad & {
    readonly prefixCacheQueries?: number;
    readonly prefixCacheHits?: number;
  };
  readonly dpRank: number;
}

const OURS = [
  "running",
  "waiting",
  "kv_usage",
  "num_gpu_blocks",
  "prefix_cache_queries",
  "prefix_cache_hits",
] as const;

function bad(path: string, message: string): never {
  throw new ApiError("invalid_request", `${path} ${message}`, [{ path, message }]);
}

export function pushedLoad(b: PushLoadBody): PushedLoadReport {
  const flatFpm = [...FORWARD_PASS_WORKER_FIELDS, ...FORWARD_PASS_KV_FIELDS].filter(
    (k) => b[k] !== undefined,
  );
  const nested = b.worker_stats !== undefined || b.kv_stats !== undefined;
  const fpm = flatFpm.length > 0 || nested || b.spec_decode_stats !== undefined;
  if (!fpm) {
    for (const k of ["running", "waiting", "kv_usage"] as const) {
      if (b[k] === undefined) bad(`body/${k}`, "is required");
    }
    return {
      dpRank: b.dp_rank ?? 0,
      load: {
        running: b.running!,
        waiting: b.waiting!,
        kvUsage: b.kv_usage!,
        ...(b.num_gpu_blocks === undefined ? {} : { numGpuBlocks: b.num_gpu_blocks }),
        ...(b.prefix_cache_queries === undefined
          ? {}
          : { prefixCacheQueries: b.prefix_cache_queries }),
        ...(b.prefix_cache_hits === undefined ? {} : { prefixCacheHits: b.prefix_cache_hits }),
      },
    };
  }
  const mixed = OURS.find((k) => b[k] !== undefined);
  if (mixed !== undefined) {
    bad(
      `body/${mixed}`,
      "cannot be mixed with ForwardPassMetrics fields: send one shape or the other",
    );
  }
  if (nested && flatFpm.length > 0) {
    bad(
      `body/${flatFpm[0]}`,
      "cannot be sent beside worker_stats/kv_stats: nest it or flatten all",
    );
  }
  const where: Record<string, string> = {};
  let fields: ForwardPassMetricsFields = b;
  if (nested) {
    fields = { ...b.worker_stats, ...b.kv_stats };
    for (const k of FORWARD_PASS_WORKER_FIELDS) where[k] = `body/worker_stats/${k}`;
    for (const k of FORWARD_PASS_KV_FIELDS) where[k] = `body/kv_stats/${k}`;
  }
  const result = loadFromForwardPassMetrics(fields);
  if (!result.ok) bad(where[result.field] ?? `body/${result.field}`, result.message);
  const rank = result.dpRank;
  if (rank !== null && b.dp_rank !== undefined && rank !== b.dp_rank) {
    bad("body/dp_rank", `is ${b.dp_rank} but data_parallel_rank is ${rank}`);
  }
  return { dpRank: b.dp_rank ?? rank ?? 0, load: result.load };
}
