/**
 * The replay tool end to end on slices of the real trace: a single infinite worker and
 * round-robin over infinite workers reproduce the ceilings computed straight from the
 * hash_ids, runs are deterministic per seed, the kv policy's index takes every event of
 * an evicting fleet, and the CLI prints its table, JSON line and plot.
 */

import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { infiniteCacheCeiling } from "../src/replay/ceiling.js";
import { type CompareOptions, comparePolicies } from "../src/replay/compare.js";
import { main } from "../src/replay/replay-main.js";
import { DEFAULT_TIMING } from "../src/replay/timing-model.js";
import { loadTrace, type TraceRequest } from "../src/replay/trace.js";
import { DEFAULT_SCHEDULER_CONFIG } from "../src/scheduler/defaults.js";

const TRACE = fileURLToPath(new URL("../traces/mooncake-conversation-2k.jsonl", import.meta.url));
const slice = loadTrace(TRACE, { limit: 300 });

const base: CompareOptions = {
  workers: 4,
  capacityBlocks: null,
  blockSize: 16,
  timing: DEFAULT_TIMING,
  seed: 7,
  eventDelayMs: 5,
  scrapeIntervalMs: 1000,
  policies: ["round_robin"],
  scheduler: DEFAULT_SCHEDULER_CONFIG,
  reference: false,
};

const tmp = mkdtempSync(join(tmpdir(), "kvrouter-replay-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe("replay against the trace's own ceilings", () => {
  it("one worker with unlimited capacity hits exactly the one-cache ceiling", () => {
    const [run] = comparePolicies(slice, { ...base, workers: 1 });
    const ceiling = infiniteCacheCeiling(slice, { blockSize: 16 });
    expect(ceiling.tokenHits).toBeGreaterThan(0);
    expect(run!.summary.hitTokens).toBe(ceiling.tokenHits);
    expect(run!.summary.inputTokens).toBe(ceiling.tokens);
    expect(run!.evictions).toBe(0);
  });

  it("round-robin over unlimited workers hits exactly the cache-blind figure", () => {
    const [run] = comparePolicies(slice, base);
    const expected = infiniteCacheCeiling(slice, { workers: 4, blockSize: 16 });
    expect(run!.summary.hitTokens).toBe(expected.tokenHits);
    expect(expected.tokenHits).toBeLessThan(infiniteCacheCeiling(slice).tokenHits);
  });

  it("the reference run is one worker holding the whole fleet", () => {
    const runs = comparePolicies(slice, { ...base, policies: [], reference: true });
    expect(runs.map((r) => r.label)).toEqual(["reference"]);
    expect(runs[0]!.summary.workers).toBe(1);
    expect(runs[0]!.summary.hitTokens).toBe(infiniteCacheCeiling(slice).tokenHits);
  });

  it("the reference is n workers in one: a prompt's whole prefill, overhead included, takes 1/n", () => {
    // One 5,200-token prompt: 20 ms + 1 s on one worker of the fleet, so (20 ms + 1 s) / 4
    // on the 4-worker pool — not 20 ms + 1 s / 4, which would let the pool start only
    // 1 / 20 ms requests a second against the fleet's 4 / 20 ms.
    const one: TraceRequest[] = [
      { index: 0, arrivalMs: 0, inputLength: 5_200, outputLength: 1, hashIds: [1] },
    ];
    const [fleet, ref] = comparePolicies(one, { ...base, reference: true });
    expect(fleet!.ttftSorted[0]).toBeCloseTo(1_020, 6);
    expect(ref!.label).toBe("reference");
    expect(ref!.ttftSorted[0]).toBeCloseTo(1_020 / 4, 6);
    // Many short prompts at once: the pool clears them as fast as the fleet's 4 workers.
    const burst: TraceRequest[] = Array.from({ length: 40 }, (_, i) => ({
      index: i,
      arrivalMs: 0,
      inputLength: 16,
      outputLength: 1,
      hashIds: [100 + i],
    }));
    const [f2, r2] = comparePolicies(burst, { ...base, reference: true });
    const last = (r: typeof f2) => r!.ttftSorted[r!.ttftSorted.length - 1]!;
    expect(last(r2)).toBeLessThanOrEqual(last(f2) + 1e-6);
  });
});

describe("determinism and the kv policy", () => {
  const strip = (runs: ReturnType<typeof comparePolicies>) =>
    runs.map(({ wallMs: _w, ...r }) =>
      JSON.stringify(r, (_k, v) => (v instanceof Float64Array ? [...v] : v)),
    );

  it("gives the same result for the same seed and another for another seed", () => {
    const o: CompareOptions = { ...base, policies: ["random", "kv"], capacityBlocks: 4000 };
    const part = slice.slice(0, 150);
    const a = strip(comparePolicies(part, o));
    const b = strip(comparePolicies(part, o));
    expect(a).toEqual(b);
    const c = strip(comparePolicies(part, { ...o, seed: 8 }));
    expect(c[0]).not.toEqual(a[0]);
  });

  it("applies every KV event of an evicting fleet to the router's index", () => {
    const [kv] = comparePolicies(slice, { ...base, policies: ["kv"], capacityBlocks: 20_000 });
    expect(kv!.evictions).toBeGreaterThan(0);
    expect(kv!.eventProblems).toEqual({});
  });

  it("routes follow-up turns to their cache on a fleet with spare capacity", () => {
    const fast = { ...DEFAULT_TIMING, prefillTokensPerSec: 50_000 };
    const [kv, rr] = comparePolicies(slice, {
      ...base,
      timing: fast,
      policies: ["kv", "round_robin"],
    });
    const ceiling = infiniteCacheCeiling(slice).tokenHits;
    expect(rr!.summary.hitTokens).toBeLessThan(kv!.summary.hitTokens);
    expect(kv!.summary.hitTokens).toBeLessThanOrEqual(ceiling);
  });
});

describe("kvrouter replay CLI", () => {
  it("prints a table and one JSON object on the last line, and writes the plot", async () => {
    const svg = join(tmp, "plot.svg");
    const chunks: string[] = [];
    const write = process.stdout.write.bind(process.stdout);
    const errWrite = process.stderr.write.bind(process.stderr);
    process.stdout.write = ((s: string) =>
      chunks.push(String(s)) > 0) as typeof process.stdout.write;
    process.stderr.write = (() => true) as typeof process.stderr.write;
    let code: number;
    try {
      code = await main([
        "--trace",
        TRACE,
        "--limit",
        "120",
        "--workers",
        "3",
        "--policy",
        "baselines",
        "--policy",
        "dynamo_kv",
        "--json",
        "--svg",
        svg,
      ]);
    } finally {
      process.stdout.write = write;
      process.stderr.write = errWrite;
    }
    expect(code).toBe(0);
    const lines = chunks.join("").trimEnd().split("\n");
    expect(lines[0]).toMatch(/^policy\s+hit rate/);
    const report = JSON.parse(lines.at(-1)!);
    expect(report.runs.map((r: { label: string }) => r.label)).toEqual([
      "kv",
      "round_robin",
      "random",
      "least_loaded",
      "dynamo_kv",
    ]);
    expect(report.runs[0].summary.requests).toBe(120);
    expect(report.ceilings.single.tokenHitRate).toBeGreaterThan(0);
    const plot = readFileSync(svg, "utf8");
    expect(plot.startsWith("<svg")).toBe(true);
    expect(plot).toContain("least_loaded");
  }, 120_000); // five policies on worker threads: slow on a loaded machine

  it("fails with exit code 2 naming a bad flag, and 1 on an unreadable trace", async () => {
    const err: string[] = [];
    const errWrite = process.stderr.write.bind(process.stderr);
    process.stderr.write = ((s: string) => err.push(String(s)) > 0) as typeof process.stderr.write;
    try {
      expect(await main(["--trace", TRACE, "--workers", "x"])).toBe(2);
      expect(await main(["--trace", join(tmp, "missing.jsonl")])).toBe(1);
    } finally {
      process.stderr.write = errWrite;
    }
    expect(err.join("")).toMatch(/--workers must be a positive integer/);
    expect(err.join("")).toMatch(/cannot read trace/);
  });
});
