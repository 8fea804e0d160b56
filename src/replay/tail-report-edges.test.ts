/**
 * The tail report's edge cases, on small traces built by hand: a run that served nothing
 * (its goal is not met), requests the policy dropped that the reference served (counted,
 * and the per-request figures of the requests after a dropped one are their own).
 * Trace blocks are 512 tokens (hash_ids), the router's 16; 2 workers of 64 blocks (1,024
 * tokens) each, so the reference (one worker of the fleet's 128 blocks) serves a
 * 1,500-token prompt that no worker of the fleet can hold.
 */

import { describe, expect, it } from "vitest";
import { DEFAULT_SCHEDULER_CONFIG } from "../scheduler/defaults.js";
import { type CompareOptions, runJob } from "./compare.js";
import { matrixTailReports, verdict } from "./matrix-tail.js";
import { formatTailReport, tailReport } from "./tail-report.js";
import { DEFAULT_TIMING } from "./timing-model.js";
import type { TraceRequest } from "./trace.js";

const opts: CompareOptions = {
  workers: 2,
  capacityBlocks: 64,
  blockSize: 16,
  timing: DEFAULT_TIMING,
  seed: 1,
  eventDelayMs: 5,
  scrapeIntervalMs: 1000,
  policies: ["round_robin"],
  scheduler: DEFAULT_SCHEDULER_CONFIG,
  reference: true,
  tail: { factor: 2, policies: ["round_robin"] },
};

const at = (index: number, s: number, inputLength: number, hashIds: number[]): TraceRequest => ({
  index,
  arrivalMs: s * 1000,
  inputLength,
  outputLength: 1,
  hashIds,
});

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
