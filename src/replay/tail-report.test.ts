/**
 * The tail report on a 15-request trace built by hand: 2 workers routed round-robin,
 * 1,000 tokens/s, 500 ms per prefill, one running request per worker, goal line 3 s.
 * Every request's TTFT, bound and cause is worked out in the comments below; the test
 * fails if the bound leaves out the fixed prefill overhead (request 0 stops being forced)
 * or uses the policy's own hit instead of the best any worker could have held (request 3
 * becomes forced). Then the CLI flag end to end, and the bound against kv on a slice of
 * the real trace (with the p99 floor against the bounds' nearest-rank p99).
 */

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { DEFAULT_SCHEDULER_CONFIG } from "../scheduler/defaults.js";
import { type CompareOptions, runJob } from "./compare.js";
import { parseReplayArgs, ReplayUsageError } from "./options.js";
import { main } from "./replay-main.js";
import type { TailData } from "./tail-data.js";
import { classify, p99Allowance, tailReport } from "./tail-report.js";
import { DEFAULT_TIMING } from "./timing-model.js";
import { loadTrace, type TraceRequest } from "./trace.js";

// [arrival s, prompt tokens, output tokens, hash_ids]; round-robin: even → w0, odd → w1.
const ROWS: [number, number, number, number[]][] = [
  // 0 w0: new 2,800-token prompt: 0.5 + 2.8 = 3.3 s > 3 — forced only with the overhead.
  [0, 2800, 1, [1, 2, 3, 4, 5, 6]],
  // 1 w1: 0.6 s.
  [0, 100, 1, [10]],
  // 2 w0 at 4.0: hits request 0's 2,800 tokens (w0 free since 3.3): 1.0 s.
  [4, 3300, 1, [1, 2, 3, 4, 5, 6, 7]],
  // 3 w1 at 4.0: nothing cached on w1: 0.5 + 3.3 = 3.8 s > 3; but request 2 holds all 6
  // of its first blocks (3,072 tokens): bound 0.5 + 0.228 = 0.728 s → own prefill.
  [4, 3300, 1, [1, 2, 3, 4, 5, 6, 8]],
  // 4 w0 at 4.5: behind request 2 until 5.0, 0.6 s: TTFT 1.1 s.
  [4.5, 100, 1, [20]],
  // 5 w1 at 4.5: behind request 3 until 7.8 (3.3 s left), 0.7 s: TTFT 4.0 → head-of-line.
  [4.5, 200, 1, [21]],
  // 6, 8, 10 w0 at 9.0, 9.1, 9.2: 0.6 s each back to back (to 10.8): TTFT ≤ 1.6 s.
  // 7, 9, 11 w1 at 9.0, 9.1, 9.2: 1.5 s each: 9.0–10.5, 10.5–12.0, 12.0–13.5; request 11
  // waits 1.3 s of request 7 and 1.5 s of request 9, 2.8 + 1.5 = 4.3 s → backlog (not
  // head-of-line: 1.3 + 1.5 ≤ 3). Request 9: 2.9 s, under the line.
  [9, 100, 1, [30]],
  [9, 1000, 1, [31, 131]],
  [9.1, 100, 1, [32]],
  [9.1, 1000, 1, [33, 133]],
  [9.2, 100, 1, [34]],
  [9.2, 1000, 1, [35, 135]],
  // 12 w0 at 20.0: 0.6 s, then 200 output tokens hold w0's only slot until 25.6.
  [20, 100, 201, [40]],
  // 13 w1: 0.6 s.
  [20, 100, 1, [41]],
  // 14 w0 at 20.7: w0's prefill idle, no slot until 25.6: TTFT 5.5 s → slots.
  [20.7, 100, 1, [42]],
];
const TRACE: TraceRequest[] = ROWS.map(([s, inputLength, outputLength, hashIds], index) => ({
  index,
  arrivalMs: s * 1000,
  inputLength,
  outputLength,
  hashIds,
}));

const opts: CompareOptions = {
  workers: 2,
  capacityBlocks: null,
  blockSize: 16,
  timing: {
    prefillTokensPerSec: 1000,
    prefillOverheadMs: 500,
    decodeMsPerToken: 25,
    maxNumSeqs: 1,
  },
  seed: 1,
  eventDelayMs: 5,
  scrapeIntervalMs: 1000,
  policies: ["round_robin"],
  scheduler: DEFAULT_SCHEDULER_CONFIG,
  reference: false,
  tail: { factor: 2, policies: ["round_robin"] },
};

const tmp = mkdtempSync(join(tmpdir(), "kvrouter-tail-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function hand(): TailData {
  const run = runJob(TRACE, "round_robin", opts);
  expect(run.tailData).toBeDefined();
  return run.tailData!;
}

describe("tail report on a trace worked out by hand", () => {
  it("has the TTFTs, bounds and best hits of the comments", () => {
    const d = hand();
    const ttft = Array.from(d.ttftMs, (x) => Math.round(x));
    expect(ttft).toEqual([
      3300, 600, 1000, 3800, 1100, 4000, 600, 1500, 1100, 2900, 1600, 4300, 600, 600, 5500,
    ]);
    expect(d.bestHitTokens[2]).toBe(2800);
    expect(d.bestHitTokens[3]).toBe(3072);
    expect(d.hitTokens[3]).toBe(0);
    expect(d.boundMs[0]).toBeCloseTo(3300, 6);
    expect(d.boundMs[3]).toBeCloseTo(728, 6);
    expect(d.aheadIndex[5]).toBe(3);
    expect(d.aheadMs[11]).toBeCloseTo(1300, 6);
    expect(d.busyAheadMs[11]).toBeCloseTo(2800, 6);
    expect(d.busyAheadMs[14]).toBe(0);
    expect(d.hitAboveBest).toBe(0);
    for (let k = 0; k < d.ttftMs.length; k++)
      expect(d.boundMs[k]).toBeLessThanOrEqual(d.ttftMs[k]!);
  });

  it("counts forced requests and classifies the rest", () => {
    const d = hand();
    const r = tailReport("round_robin", d, 1500, 2);
    expect(r.lineMs).toBe(3000);
    expect(r.requests).toBe(15);
    expect(r.allowance).toBe(0); // 15 − ⌈14.85⌉
    expect(r.above).toBe(5);
    expect(r.met).toBe(false);
    expect(r.forced).toBe(1);
    expect(r.unreachable).toBe(true);
    expect(r.room).toBe(-1);
    expect(r.p99FloorMs).toBeCloseTo(3300, 6); // 15 requests: the p99 is the largest
    const counts = Object.fromEntries(Object.entries(r.classes).map(([c, s]) => [c, s.count]));
    expect(counts).toEqual({ forced: 1, ownPrefill: 1, headOfLine: 1, backlog: 1, slots: 1 });
    expect([0, 3, 5, 11, 14].map((k) => classify(d, k, 3000))).toEqual([
      "forced",
      "ownPrefill",
      "headOfLine",
      "backlog",
      "slots",
    ]);
    // Request 0 (no queue anywhere) and 11 (w0 freed at 10.8: 1.6 + 1.5 s) stay above
    // the line even on the first worker to free; 3, 5 and 14 would not.
    expect(r.aboveOnFirstFree).toBe(2);
    expect(r.classes.backlog.waitMs).toEqual([2800, 2800]);
    // A looser line: only request 14 (5.5 s) is above 5 s; nothing forced, room 0.
    const loose = tailReport("round_robin", d, 2500, 2);
    expect([loose.above, loose.forced, loose.room, loose.unreachable]).toEqual([1, 0, 0, false]);
  });

  it("the allowance is what the nearest-rank p99 permits", () => {
    expect(p99Allowance(12_031)).toBe(120);
    expect(p99Allowance(1000)).toBe(10);
    expect(p99Allowance(99)).toBe(0);
    expect(p99Allowance(0)).toBe(0);
  });
});

describe("--tail-report", () => {
  it("implies the reference, defaults to kv and checks its flags", () => {
    const o = parseReplayArgs(["--tail-report"])!;
    expect(o.reference).toBe(true);
    expect(o.tail).toEqual({ factor: 2, policies: ["kv"], requestsFile: null });
    expect(parseReplayArgs(["--policy", "round_robin", "--tail-report"])!.tail!.policies).toEqual([
      "round_robin",
    ]);
    expect(parseReplayArgs([])!.tail).toBeNull();
    expect(() => parseReplayArgs(["--tail-factor", "3"])).toThrow(/need --tail-report/);
    expect(() => parseReplayArgs(["--tail-report", "--tail-factor", "0"])).toThrow(
      ReplayUsageError,
    );
    expect(() =>
      parseReplayArgs(["--policy", "kv", "--tail-report", "--tail-policy", "random"]),
    ).toThrow(/not among the policies run/);
  });

  it("prints the report and puts it in the JSON line", async () => {
    const file = join(tmp, "hand.jsonl");
    const listFile = join(tmp, "above.jsonl");
    writeFileSync(
      file,
      TRACE.map((r) =>
        JSON.stringify({
          timestamp: r.arrivalMs,
          input_length: r.inputLength,
          output_length: r.outputLength,
          hash_ids: r.hashIds,
        }),
      ).join("\n"),
    );
    const out: string[] = [];
    const write = process.stdout.write;
    process.stdout.write = ((s: string) => {
      out.push(s);
      return true;
    }) as typeof process.stdout.write;
    let code: number;
    try {
      code = await main([
        "--trace",
        file,
        "--workers",
        "2",
        "--policy",
        "round_robin",
        "--prefill-tokens-per-s",
        "1000",
        "--prefill-overhead-ms",
        "500",
        "--max-num-seqs",
        "1",
        "--tail-report",
        "--tail-factor",
        "0.5",
        "--tail-requests",
        listFile,
        "--jobs",
        "1",
        "--json",
      ]);
    } finally {
      process.stdout.write = write;
    }
    expect(code).toBe(0);
    const text = out.join("");
    expect(text).toContain("tail report, round_robin: goal p99 ≤ 0.5 × the reference's p99");
    const json = JSON.parse(text.trim().split("\n").at(-1)!);
    const ref = json.runs.find((r: { label: string }) => r.label === "reference");
    const rr = json.runs.find((r: { label: string }) => r.label === "round_robin");
    expect(ref.tail).toBeUndefined();
    expect(rr.tail.lineMs).toBeCloseTo(0.5 * ref.summary.ttftMs.p99, 3);
    expect(rr.tail.above).toBeGreaterThan(0);
    expect(rr.tail.requests).toBe(15);
    expect([rr.tail.referenceRequests, rr.tail.droppedServedByReference]).toEqual([15, 0]);
    expect(text).toContain("the reference served 15; round_robin dropped 0 of them\n");
    expect(rr.tail.above).toBe(
      (rr.tail.classes.forced.count as number) +
        rr.tail.classes.ownPrefill.count +
        rr.tail.classes.headOfLine.count +
        rr.tail.classes.backlog.count +
        rr.tail.classes.slots.count,
    );
    expect(rr.tailData).toBeUndefined();
    const listed = readFileSync(listFile, "utf8")
      .split("\n")
      .filter((l) => l !== "")
      .map((l) => JSON.parse(l));
    expect(listed.length).toBe(rr.tail.above);
    expect(listed.filter((x) => x.cause === "forced").length).toBe(rr.tail.forced);
    for (const x of listed) expect(x.ttftMs).toBeGreaterThan(rr.tail.lineMs - 0.1);
  });
});

describe("the bound against kv on the real trace", () => {
  it("is never above a request's TTFT and no hit exceeds the best possible", () => {
    const trace = fileURLToPath(
      new URL("../../traces/mooncake-conversation-2k.jsonl", import.meta.url),
    );
    const slice = loadTrace(trace, { limit: 300 });
    const d = runJob(slice, "kv", {
      ...opts,
      workers: 4,
      timing: DEFAULT_TIMING,
      policies: ["kv"],
      tail: { factor: 2, policies: ["kv"] },
    }).tailData!;
    expect(d.ttftMs.length).toBe(300);
    expect(d.hitAboveBest).toBe(0);
    let equal = 0;
    for (let k = 0; k < 300; k++) {
      expect(d.boundMs[k]).toBeLessThanOrEqual(d.ttftMs[k]! + 1e-9);
      expect(d.busyAheadMs[k]).toBeLessThanOrEqual(d.waitMs[k]! + 1e-9);
      if (d.hitTokens[k] === d.bestHitTokens[k] && d.waitMs[k] === 0) equal++;
    }
    // The bound is reached where kv found the best prefix and did not queue.
    expect(equal).toBeGreaterThan(0);

    // The p99 floor is the nearest-rank p99 of the bounds: the ⌈0.99 · 300⌉ = 297th
    // smallest. And forced > allowance exactly when floor > line, for lines on, just
    // under and just over each of the largest bounds (where the two could disagree).
    const sorted = Array.from(d.boundMs).sort((a, b) => a - b);
    const floor = sorted[296]!;
    expect(sorted[299]! - sorted[290]!).toBeGreaterThan(0); // the lines below differ
    const lines = sorted.slice(285).flatMap((b) => [b - 1e-6, b, b + 1e-6]);
    let proven = 0;
    for (const line of lines) {
      const r = tailReport("kv", d, line, 1);
      expect(r.lineMs).toBe(line);
      expect(r.allowance).toBe(3);
      expect(r.p99FloorMs).toBe(floor);
      expect({ line, proven: r.forced > r.allowance }).toEqual({ line, proven: floor > line });
      if (r.unreachable) proven++;
    }
    // Both verdicts occur among those lines.
    expect(proven).toBeGreaterThan(0);
    expect(proven).toBeLessThan(lines.length);
  });
});
