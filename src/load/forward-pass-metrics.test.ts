import { describe, expect, it } from "vitest";
import { loadFromForwardPassMetrics } from "./forward-pass-metrics.js";

describe("loadFromForwardPassMetrics", () => {
  it("maps slots, waiting, usage, capacity and hit rate; the usage field wins over blocks", () => {
    expect(
      loadFromForwardPassMetrics({
        data_parallel_rank: 3,
        request_active_slots: 7,
        request_total_slots: 8,
        num_requests_waiting: 1,
        kv_active_blocks: 10,
        kv_total_blocks: 40,
        gpu_cache_usage_perc: 0.5,
        gpu_prefix_cache_hit_rate: 0.9,
      }),
    ).toEqual({
      ok: true,
      dpRank: 3,
      load: { running: 7, waiting: 1, kvUsage: 0.5, numGpuBlocks: 40, prefixCacheHitRate: 0.9 },
    });
  });

  it("computes usage from blocks and leaves unknowns out", () => {
    expect(
      loadFromForwardPassMetrics({
        request_active_slots: 0,
        num_requests_waiting: 0,
        kv_active_blocks: 1,
        kv_total_blocks: 4,
      }),
    ).toEqual({
      ok: true,
      dpRank: null,
      load: { running: 0, waiting: 0, kvUsage: 0.25, numGpuBlocks: 4 },
    });
  });

  it("names the field that is missing or inconsistent", () => {
    const r = loadFromForwardPassMetrics({ request_active_slots: 1, num_requests_waiting: 0 });
    expect(r).toMatchObject({ ok: false, field: "gpu_cache_usage_perc" });
  });
});
