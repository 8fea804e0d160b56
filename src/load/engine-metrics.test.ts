import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { type EngineMetricsTarget, parseEngineMetrics } from "./engine-metrics.js";

const fixture = (name: string) =>
  readFileSync(new URL(`../../test/fixtures/metrics/${name}`, import.meta.url), "utf8");

const vllm = (dpRank: number, model: string | null = "Qwen/Qwen3-8B"): EngineMetricsTarget => ({
  kind: "vllm",
  model,
  dpRank,
  blockSize: 16,
});

describe("parseEngineMetrics", () => {
  it("reads current vLLM names, picking the series of the worker's DP rank", () => {
    const text = fixture("vllm-current.txt");
    const r0 = parseEngineMetrics(text, vllm(0));
    expect(r0).toEqual({
      ok: true,
      notes: [],
      load: {
        running: 7,
        waiting: 2,
        kvUsage: 0.4123,
        prefixCacheQueries: 1_284_000,
        prefixCacheHits: 802_816,
        blockSize: 16,
        numGpuBlocks: 27354,
      },
    });
    const r1 = parseEngineMetrics(text, vllm(1));
    expect(r1.ok && r1.load).toMatchObject({
      running: 3,
      waiting: 0,
      kvUsage: 0.0875,
      numGpuBlocks: 27350,
    });
  });

  it("combines the engines when the rank has no series of its own (sum counts, mean usage)", () => {
    const r = parseEngineMetrics(fixture("vllm-current.txt"), vllm(5));
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.load.running).toBe(10);
    expect(r.load.waiting).toBe(2);
    expect(r.load.kvUsage).toBeCloseTo((0.4123 + 0.0875) / 2, 12);
    expect(r.notes.join(" ")).toContain("engine=5");
  });

  it("reads vLLM ≤ 0.10 names (gpu_cache_usage_perc, gpu_prefix_cache_*)", () => {
    const r = parseEngineMetrics(
      fixture("vllm-0.10.txt"),
      vllm(0, "meta-llama/Llama-3.1-8B-Instruct"),
    );
    expect(r).toEqual({
      ok: true,
      notes: [],
      load: {
        running: 4,
        waiting: 1,
        kvUsage: 0.2617,
        prefixCacheQueries: 52480,
        prefixCacheHits: 31232,
        blockSize: 16,
        numGpuBlocks: 7281,
      },
    });
  });

  it("reads SGLang names, tp rank 0 only, capacity from max_total_num_tokens", () => {
    const r = parseEngineMetrics(fixture("sglang.txt"), {
      kind: "sglang",
      model: "meta-llama/Llama-3.1-8B-Instruct",
      dpRank: 0,
      blockSize: 16,
    });
    expect(r).toEqual({
      ok: true,
      notes: [],
      load: {
        running: 12,
        waiting: 5,
        kvUsage: 0.28,
        prefixCacheHitRate: 0.007507552643049313,
        numGpuBlocks: Math.floor(161824 / 16),
      },
    });
  });

  it("reads each DP rank of SGLang's DP attention from its own first TP rank", () => {
    // --tp 4 --dp 2 --enable-dp-attention --enable-metrics-for-all-schedulers: DP rank d
    // is served by TP ranks 2d and 2d + 1, each repeating the rank's scheduler state.
    const labels = (dp: number, tp: number) =>
      `dp_rank="${dp}",engine_type="unified",model_name="m",moe_ep_rank="${tp}",pp_rank="0",tp_rank="${tp}"`;
    const lines: string[] = [];
    const per = [
      { running: 6, waiting: 3, usage: 0.5 },
      { running: 2, waiting: 1, usage: 0.25 },
    ];
    for (const [dp, v] of per.entries()) {
      for (const tp of [2 * dp, 2 * dp + 1]) {
        lines.push(`sglang:num_running_reqs{${labels(dp, tp)}} ${v.running}`);
        lines.push(`sglang:num_queue_reqs{${labels(dp, tp)}} ${v.waiting}`);
        lines.push(`sglang:token_usage{${labels(dp, tp)}} ${v.usage}`);
        lines.push(`sglang:max_total_num_tokens{${labels(dp, tp)}} 16000`);
      }
    }
    const text = `${lines.join("\n")}\n`;
    for (const [dpRank, v] of per.entries()) {
      const r = parseEngineMetrics(text, { kind: "sglang", model: "m", dpRank, blockSize: 16 });
      expect(r).toEqual({
        ok: true,
        notes: [],
        load: { running: v.running, waiting: v.waiting, kvUsage: v.usage, numGpuBlocks: 1000 },
      });
    }
  });

  it("filters by model name when several models are served", () => {
    const text = [
      'vllm:num_requests_running{model_name="a"} 1',
      'vllm:num_requests_running{model_name="b"} 20',
      'vllm:num_requests_waiting{model_name="a"} 2',
      'vllm:num_requests_waiting{model_name="b"} 30',
      'vllm:kv_cache_usage_perc{model_name="a"} 0.1',
      'vllm:kv_cache_usage_perc{model_name="b"} 0.9',
    ].join("\n");
    const a = parseEngineMetrics(text, vllm(0, "a"));
    expect(a.ok && a.load).toEqual({ running: 1, waiting: 2, kvUsage: 0.1 });
    const any = parseEngineMetrics(text, vllm(0, null));
    expect(any.ok && any.load).toEqual({ running: 21, waiting: 32, kvUsage: 0.5 });
  });

  it("fails with a message naming what is missing", () => {
    const r = parseEngineMetrics("vllm:num_requests_running 1\n# nothing else\n", vllm(0));
    expect(r).toEqual({
      ok: false,
      error: "no vllm load metrics for waiting requests, KV cache usage in the exposition",
    });
    const junk = parseEngineMetrics("<html>502 Bad Gateway</html>", vllm(0));
    expect(junk.ok).toBe(false);
  });

  it("rejects NaN or negative load and clamps usage above 1 with a note", () => {
    const nan = parseEngineMetrics(
      "vllm:num_requests_running 1\nvllm:num_requests_waiting -1\nvllm:kv_cache_usage_perc 0.1\n",
      vllm(0),
    );
    expect(nan.ok).toBe(false);
    const over = parseEngineMetrics(
      "vllm:num_requests_running 1\nvllm:num_requests_waiting 0\nvllm:kv_cache_usage_perc 1.0000001\n",
      vllm(0),
    );
    expect(over.ok && over.load.kvUsage).toBe(1);
    expect(over.ok && over.notes[0]).toContain("clamped");
    const edge = parseEngineMetrics(
      "vllm:num_requests_running 1\nvllm:num_requests_waiting 0\nvllm:kv_cache_usage_perc 1.5\n",
      vllm(0),
    );
    expect(edge.ok && edge.load.kvUsage).toBe(1);
  });

  it("fails a scrape whose KV usage looks like a percentage instead of reading it as full", () => {
    const pct = parseEngineMetrics(
      "vllm:num_requests_running 1\nvllm:num_requests_waiting 0\nvllm:kv_cache_usage_perc 85\n",
      vllm(0),
    );
    expect(pct).toEqual({
      ok: false,
      error: "KV cache usage 85 is not a fraction in 0..1 (a percentage?)",
    });
  });

  it("notes malformed lines but still reads the rest", () => {
    const r = parseEngineMetrics(
      'vllm:num_requests_running 1\nvllm:num_requests_waiting{x="1" 5\nvllm:num_requests_waiting 0\nvllm:kv_cache_usage_perc 0.5\n',
      vllm(0),
    );
    expect(r.ok && r.load).toEqual({ running: 1, waiting: 0, kvUsage: 0.5 });
    expect(r.ok && r.notes[0]).toContain("line 2");
  });
});
