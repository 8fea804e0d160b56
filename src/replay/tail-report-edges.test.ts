/**
 * The tail report's edge cases, on small traces built by hand: a run that served nothing
 * (its goal is not met), requests the policy dropped that the reference served (counted,
 * and the per-request figures of the requests after a dropped one are their own).
 * Trace blocks are 512 tokens (hash_ids), the router's 16; 2 workers of 64 blocks (1,024
 * tokens) each, so the reference (one worker of the fleet's 128 blocks) serves a
 * 1,500-token prompt that no worker of the fleet can hold. Then `--tail-requests` to a
 * file that cannot be written: refused before the run, or reported after it without
 * losing the JSON line. And outcomes whose hit exceeds the best possible (a broken bound):
 * counted, and nothing called proven.
 */

import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { runJob } from "./compare.js";
import { matrixTailReports, verdict } from "./matrix-tail.js";
import { parseReplayArgs } from "./options.js";
import { main } from "./replay-main.js";
import type { RequestOutcome } from "./sim-fleet.js";
import { collectTail } from "./tail-data.js";
import { formatTailReport, tailReport } from "./tail-report.js";
import { tailRunOptions, traceAt } from "./test-helpers.js";
import { DEFAULT_TIMING } from "./timing-model.js";

const opts = tailRunOptions({
  workers: 2,
  policy: "round_robin",
  timing: DEFAULT_TIMING,
  capacityBlocks: 64,
  reference: true,
});

const at = traceAt;

describe("tail report edge cases", () => {
  it("a run that served nothing does not meet the goal, and says what it dropped", () => {
    // Both prompts need 94 blocks: too large for a worker, not for the reference.
    const trace = [at(0, 0, 1500, [1, 2, 3]), at(1, 10, 1500, [4, 5, 6])];
    const ref = runJob(trace, "reference", opts);
    const rr = runJob(trace, "round_robin", opts);
    expect(ref.summary.rejected).toBe(0);
    expect(rr.summary.rejected).toBe(2);
    expect(Array.from(ref.tailData!.index)).toEqual([0, 1]);
    const r = tailReport(
      "round_robin",
      rr.tailData!,
      ref.summary.ttftMs.p99,
      2,
      ref.tailData!.index,
    );
    expect(r.requests).toBe(0);
    expect(Number.isNaN(r.p99Ms)).toBe(true);
    expect(r.met).toBe(false);
    expect([r.referenceRequests, r.droppedServedByReference]).toEqual([2, 2]);
    const text = formatTailReport(r);
    expect(text).toContain("goal not met (it served no request)");
    expect(text).toContain("the reference served 2; round_robin dropped 2 of them");
    // The matrix's verdict agrees.
    const cell = { workload: "w", cacheTokens: 1024, load: 0.5 };
    const rows = matrixTailReports(
      [
        { ...cell, policy: "reference", ...ref },
        { ...cell, policy: "round_robin", ...rr },
      ] as unknown as Parameters<typeof matrixTailReports>[0],
      2,
    );
    expect(rows.map((x) => x.report.policy)).toEqual(["round_robin"]);
    expect(verdict(rows[0]!.report)).toBe("not met (served no request)");
  });

  it("after a dropped request, each served request has its own best hit", () => {
    // 0 is dropped (too large for w0); 1 and 2 share their first 512-token page, so 2's
    // best hit is 512 tokens and 1's is 0. Served figures are indexed 0, 1 for trace
    // requests 1, 2: reading the best hit by position instead of trace index gives 0.
    const trace = [at(0, 0, 1500, [1, 2, 3]), at(1, 10, 600, [10, 11]), at(2, 20, 600, [10, 12])];
    const ref = runJob(trace, "reference", opts);
    const rr = runJob(trace, "round_robin", opts);
    const d = rr.tailData!;
    expect(Array.from(d.index)).toEqual([1, 2]);
    expect(Array.from(d.bestHitTokens)).toEqual([0, 512]);
    expect(d.hitAboveBest).toBe(0);
    for (let k = 0; k < 2; k++) expect(d.boundMs[k]).toBeLessThanOrEqual(d.ttftMs[k]! + 1e-9);
    const r = tailReport("round_robin", d, ref.summary.ttftMs.p99, 2, ref.tailData!.index);
    expect([r.requests, r.referenceRequests, r.droppedServedByReference]).toEqual([2, 3, 1]);
    expect(formatTailReport(r)).toContain(
      "the reference served 3; round_robin dropped 1 of them (its p99 is over fewer requests than the reference's)",
    );
  });
});

const tmp = mkdtempSync(join(tmpdir(), "kvrouter-tail-edges-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** Runs `kvrouter replay` in this process; its exit code, stdout and stderr. */
async function replay(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const w = process.stdout.write;
  const e = process.stderr.write;
  process.stdout.write = ((x: string) => out.push(x) > 0) as typeof process.stdout.write;
  process.stderr.write = ((x: string) => err.push(x) > 0) as typeof process.stderr.write;
  try {
    const code = await main(argv);
    return { code, out: out.join(""), err: err.join("") };
  } finally {
    process.stdout.write = w;
    process.stderr.write = e;
  }
}

describe("--tail-requests FILE that cannot be written", () => {
  it("is refused at option parsing, naming the flag", () => {
    const tail = (file: string) => () =>
      parseReplayArgs(["--tail-report", "--tail-requests", file]);
    expect(tail(join(tmp, "no-such-dir", "above.jsonl"))).toThrow(
      /^--tail-requests: cannot write '.*above\.jsonl': directory .*no-such-dir does not exist$/,
    );
    expect(tail(tmp)).toThrow(/^--tail-requests: cannot write '.*': it is a directory$/);
    expect(tail(join(tmp, "fine.jsonl"))).not.toThrow();
  });

  it("a usage error before the run: exit 2, one message, no run", async () => {
    const trace = join(tmp, "t.jsonl");
    writeFileSync(
      trace,
      `${JSON.stringify({ timestamp: 0, input_length: 100, output_length: 1, hash_ids: [1] })}\n`,
    );
    const r = await replay([
      "--trace",
      trace,
      "--tail-report",
      "--tail-requests",
      join(tmp, "missing", "x.jsonl"),
    ]);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/^kvrouter replay: --tail-requests: cannot write /);
    expect(r.out).toBe("");
  });

  it.skipIf(!existsSync("/dev/full"))(
    "a write that fails after the run: one line on stderr, the JSON line still printed, exit 1",
    async () => {
      const trace = join(tmp, "t2.jsonl");
      writeFileSync(
        trace,
        [0, 1, 2]
          .map((i) =>
            JSON.stringify({
              timestamp: i * 10,
              input_length: 600,
              output_length: 1,
              hash_ids: [2 * i, 2 * i + 1],
            }),
          )
          .join("\n"),
      );
      // /dev/full passes the check (it exists and is writable) and fails every write (ENOSPC).
      const r = await replay([
        "--trace",
        trace,
        "--workers",
        "2",
        "--policy",
        "round_robin",
        "--tail-report",
        "--tail-factor",
        "0.01",
        "--tail-requests",
        "/dev/full",
        "--jobs",
        "1",
        "--json",
      ]);
      expect(r.code).toBe(1);
      const lines = r.err.split("\n").filter((l) => l.includes("/dev/full"));
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(
        /^kvrouter replay: cannot write --tail-requests \/dev\/full: .*ENOSPC/,
      );
      expect(r.err).not.toMatch(/\n\s+at /); // no stack trace
      const json = JSON.parse(r.out.trim().split("\n").at(-1)!);
      expect(json.runs.find((x: { label: string }) => x.label === "round_robin").tail.above).toBe(
        3,
      );
    },
  );
});

describe("a hit above the best possible", () => {
  it("is counted in hitAboveBest, and the report proves nothing", () => {
    // Two unrelated 1,024-token prompts: the best possible hit of each is 0. The outcomes
    // claim request 1 hit 512 tokens (a model or bound bug): collectTail must count it,
    // and forced > allowance must then not be reported as a proof.
    const trace = [at(0, 0, 1024, [1, 2]), at(1, 1, 1024, [3, 4])];
    const timing = { ...DEFAULT_TIMING, prefillTokensPerSec: 1000, prefillOverheadMs: 0 };
    const outcome = (index: number, hit: number): RequestOutcome => {
      const a = index * 1000;
      return {
        index,
        worker: index,
        arrivalMs: a,
        inputTokens: 1024,
        outputTokens: 1,
        hitTokens: hit,
        startMs: a,
        firstTokenMs: a + 1024 - hit,
        doneMs: a + 1100,
        rejected: false,
      };
    };
    const d = collectTail(trace, [outcome(0, 0), outcome(1, 512)], 2, timing, 16);
    expect(Array.from(d.bestHitTokens)).toEqual([0, 0]);
    expect(d.hitAboveBest).toBe(1);
    // Request 1's TTFT (512 ms) is below its "bound" (1,024 ms): the bound is wrong here.
    expect(d.ttftMs[1]).toBeLessThan(d.boundMs[1]!);
    // Line 0.5 s: both bounds (1.024 s) are above it, 2 forced > 0 allowed.
    const r = tailReport("kv", d, 250, 2);
    expect([r.forced, r.allowance, r.hitAboveBest]).toEqual([2, 0, 1]);
    expect(r.unreachable).toBe(false);
    const text = formatTailReport(r);
    expect(text).toContain("WARNING: 1 requests hit more than the best possible prefix");
    expect(text).toContain("forced 2 > 0 allowed, but the bound failed its check");
    expect(text).toContain("nothing is proven");
    expect(text).not.toContain("no placement meets the goal");
    // The same outcomes with an honest hit: proven.
    const ok = tailReport(
      "kv",
      collectTail(trace, [outcome(0, 0), outcome(1, 0)], 2, timing, 16),
      250,
      2,
    );
    expect([ok.hitAboveBest, ok.unreachable]).toEqual([0, true]);
    expect(formatTailReport(ok)).toContain(
      "forced 2 > 0 allowed: no placement meets the goal (proof:",
    );
  });
});
