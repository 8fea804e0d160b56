import { describe, expect, it, vi } from "vitest";
import { formatMatrix, type MatrixResult, runMatrixJob, splitMatrixArgs } from "./matrix.js";
import { matrixMain } from "./matrix-main.js";
import { renderMatrixSvg } from "./matrix-svg.js";
import { buildWorkload, scaleToLoad } from "./matrix-workloads.js";
import { DEFAULT_TRACE, parseReplayArgs } from "./options.js";

const options = { ...parseReplayArgs(["--jobs", "1"])!, policies: [] };

describe("replay matrix", () => {
  it("scales arrivals so round-robin's measured prefill utilisation lands near the target", () => {
    for (const load of [0.5, 0.8]) {
      const r = runMatrixJob({
        workload: "shared-prefix",
        load,
        policy: "round_robin",
        cacheTokens: null,
        requests: 300,
        trace: DEFAULT_TRACE,
        gen: {},
        options,
      });
      expect(r.summary.prefillUtilisation).toBeGreaterThan(load - 0.08);
      expect(r.summary.prefillUtilisation).toBeLessThan(load + 0.03);
    }
  });

  it("runs a cell with the job's cache size, not the options' (limited caches evict)", () => {
    const job = (cacheTokens: number | null) =>
      runMatrixJob({
        workload: "chat",
        load: 0.8,
        policy: "kv",
        cacheTokens,
        requests: 300,
        trace: DEFAULT_TRACE,
        gen: {},
        options,
      });
    const unlimited = job(null);
    const limited = job(20_000);
    expect(unlimited.evictions).toBe(0);
    expect(limited.cacheTokens).toBe(20_000);
    expect(limited.evictions).toBeGreaterThan(0);
    expect(limited.summary.hitRate).toBeLessThan(unlimited.summary.hitRate);
  });

  it("a higher load is a shorter trace with the same requests", () => {
    const base = buildWorkload("chat", { requests: 200, seed: 1, trace: DEFAULT_TRACE });
    const a = scaleToLoad(base, 0.5, 8, 16, options.timing);
    const b = scaleToLoad(base, 0.95, 8, 16, options.timing);
    expect(b.factor / a.factor).toBeCloseTo(0.5 / 0.95, 6);
    expect(a.requests.map((r) => r.hashIds)).toEqual(base.map((r) => r.hashIds));
  });

  it("prints a table per workload and cache size, kv against the best peer, and an SVG", () => {
    const mk = (
      policy: MatrixResult["policy"],
      mean: number,
      p99: number,
      cacheTokens: number | null = null,
    ): MatrixResult =>
      ({
        workload: "hot-prefix",
        load: 0.5,
        policy,
        cacheTokens,
        factor: 1,
        wallMs: 1,
        evictions: cacheTokens === null ? 0 : 7,
        summary: { hitRate: 0.5, ttftMs: { mean, p99 }, prefillUtilisation: 0.5 },
      }) as unknown as MatrixResult;
    const results = [
      mk("kv", 1000, 3000),
      mk("round_robin", 2000, 4000),
      mk("dynamo_kv", 500, 5000),
      mk("kv", 1000, 3000, 2_000_000),
      mk("dynamo_kv", 2000, 2000, 2_000_000),
    ];
    const text = formatMatrix(results);
    expect(text).toContain("### hot-prefix, unlimited caches");
    expect(text).toContain("### hot-prefix, 2,000,000-token caches");
    expect(text).toContain("| kv | 50.0 % | 1.00 | 3.00 | 0 |");
    expect(text).toContain("| kv | 50.0 % | 1.00 | 3.00 | 7 |");
    expect(text).toContain(
      "| hot-prefix | unlimited | 50 % | dynamo_kv | 2.00 ✗ | dynamo_kv | 0.60 |",
    );
    expect(text).toContain(
      "| hot-prefix | 2,000,000 | 50 % | dynamo_kv | 0.50 | dynamo_kv | 1.50 ✗ |",
    );
    const svg = renderMatrixSvg(results, "t");
    expect(svg).toContain("<svg");
    expect(svg).toContain("2,000,000-token caches");
    // With the one-pool reference, kv's hit rate against it (goal ≥ 0.95).
    const ref = { ...mk("reference", 900, 900, 2_000_000) };
    (ref.summary as { hitRate: number }).hitRate = 0.6;
    const withRef = formatMatrix([...results, ref]);
    expect(withRef).toContain("| reference | 60.0 % | 0.90 | 0.90 | 7 |");
    expect(withRef).toContain(
      "| hot-prefix | 2,000,000 | 50 % | dynamo_kv | 0.50 | dynamo_kv | 1.50 ✗ | 0.83 ✗ |",
    );
    expect(withRef).toContain(
      "| hot-prefix | unlimited | 50 % | dynamo_kv | 2.00 ✗ | dynamo_kv | 0.60 | |",
    );
  });

  it("says which cells left rejected requests out, and does not compare them", () => {
    // 4,000-token caches: most shared-prefix prompts (~6,000 tokens) fit no worker, while
    // the one-pool reference (the fleet's capacity in one) admits them all.
    const options = parseReplayArgs(["--jobs", "1"])!;
    const results = (["kv", "sglang_cache_aware", "reference"] as const).map((policy) =>
      runMatrixJob({
        workload: "shared-prefix",
        load: 0.5,
        policy,
        cacheTokens: 4000,
        requests: 40,
        trace: DEFAULT_TRACE,
        gen: {},
        options,
      }),
    );
    expect(results[0]!.summary.rejected).toBeGreaterThan(0);
    expect(results[2]!.summary.rejected).toBe(0);
    const text = formatMatrix(results);
    expect(text).toContain(`(${results[0]!.summary.rejected} rejected)`);
    expect(text).toMatch(
      /\| shared-prefix \| 4,000 \| 50 % \| \w+ \| n\/c \| \w+ \| n\/c \| n\/c \|/,
    );
  });

  it("refuses --caches sizes that are not whole blocks, or given twice, naming the flag", async () => {
    const err: string[] = [];
    const spy = vi.spyOn(process.stderr, "write").mockImplementation((c) => {
      err.push(String(c));
      return true;
    });
    try {
      expect(await matrixMain(["--caches", "4001"])).toBe(2);
      expect(err.join("")).toContain(
        "--caches: 4001 tokens is not a whole number of 16-token blocks",
      );
      expect(await matrixMain(["--caches", "4000,unlimited,4000"])).toBe(2);
      expect(err.join("")).toContain("--caches: a size is given twice");
    } finally {
      spy.mockRestore();
    }
  });

  it("runs the one-pool reference as a cell: one worker, the fleet's capacity", () => {
    const r = runMatrixJob({
      workload: "chat",
      load: 0.8,
      policy: "reference",
      cacheTokens: 20_000,
      requests: 300,
      trace: DEFAULT_TRACE,
      gen: {},
      options,
    });
    expect(r.summary.workers).toBe(1);
    expect(r.evictions).toBeGreaterThan(0);
  });

  it("parses its own flags and leaves the rest to replay", () => {
    const s = splitMatrixArgs(["--workloads", "chat,agentic", "--loads", "0.5", "--seed", "3"]);
    expect(s.workloads).toEqual(["chat", "agentic"]);
    expect(s.loads).toEqual([0.5]);
    expect(s.rest).toEqual(["--seed", "3"]);
    expect(() => splitMatrixArgs(["--workloads", "nope"])).toThrow(/--workloads/);
    expect(splitMatrixArgs(["--gen", "prompts=4"]).gen).toEqual({ prompts: 4 });
    expect(() => splitMatrixArgs(["--gen", "nope=1"])).toThrow(/--gen/);
    expect(s.caches).toBeNull();
    expect(splitMatrixArgs(["--caches", "unlimited,2000000"]).caches).toEqual([null, 2_000_000]);
    expect(() => splitMatrixArgs(["--caches", "lots"])).toThrow(/--caches/);
  });
});
