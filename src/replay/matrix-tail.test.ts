/**
 * `kvrouter replay matrix --tail-report`: the reference runs in every cell, the reported
 * policy's goal line is the factor times its own cell's reference p99, and the table and
 * the JSON line carry the same counts.
 */

import { describe, expect, it, vi } from "vitest";
import { matrixMain } from "./matrix-main.js";

async function capture(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const o = vi.spyOn(process.stdout, "write").mockImplementation((c) => {
    out.push(String(c));
    return true;
  });
  const e = vi.spyOn(process.stderr, "write").mockImplementation((c) => {
    err.push(String(c));
    return true;
  });
  try {
    const code = await matrixMain(argv);
    return { code, out: out.join(""), err: err.join("") };
  } finally {
    o.mockRestore();
    e.mockRestore();
  }
}

describe("replay matrix --tail-report", () => {
  it("reports kv per cell against that cell's reference", async () => {
    const { code, out } = await capture([
      "--workloads",
      "chat",
      "--requests",
      "200",
      "--loads",
      "0.5,0.95",
      "--caches",
      "unlimited",
      "--policy",
      "kv",
      "--tail-report",
      "--tail-factor",
      "3",
      "--jobs",
      "1",
      "--json",
    ]);
    expect(code).toBe(0);
    expect(out).toContain("### p99 against 3 × the one-pool reference's p99 (tail report)");
    const json = JSON.parse(out.trim().split("\n").at(-1)!);
    const runs = json.runs as {
      load: number;
      policy: string;
      summary: { ttftMs: { p99: number } };
      tail?: Record<string, number> & { classes: Record<string, { count: number }> };
      tailData?: unknown;
    }[];
    expect(runs.map((r) => r.policy)).toEqual(["kv", "reference", "kv", "reference"]);
    for (const load of [0.5, 0.95]) {
      const kv = runs.find((r) => r.load === load && r.policy === "kv")!;
      const ref = runs.find((r) => r.load === load && r.policy === "reference")!;
      expect(kv.tailData).toBeUndefined();
      expect(ref.tail).toBeUndefined();
      const t = kv.tail!;
      expect(t.lineMs).toBeCloseTo(3 * ref.summary.ttftMs.p99, 3);
      expect(t.allowance).toBe(2);
      const sum = Object.values(t.classes).reduce((s, c) => s + c.count, 0);
      expect(sum).toBe(t.above);
      const row = out
        .split("\n")
        .find((l) => l.startsWith(`| chat | unlimited | ${Math.round(100 * load)} % | kv |`))!;
      const cells = row.split("|").map((c) => c.trim());
      expect(Number(cells[10])).toBe(t.above);
      expect(Number(cells[11])).toBe(t.forced);
      expect(t.p99FloorMs).toBeLessThanOrEqual(t.p99Ms!);
    }
  });

  it("refuses a tail policy the matrix does not run", async () => {
    // Without --policy the matrix runs kv, round-robin and the peers, not least_loaded.
    const bad = await capture(["--tail-report", "--tail-policy", "least_loaded"]);
    expect(bad.code).toBe(2);
    expect(bad.err).toContain("--tail-policy: least_loaded not among the matrix's policies");
    const list = await capture(["--tail-report", "--tail-requests", "x.jsonl"]);
    expect(list.code).toBe(2);
    expect(list.err).toContain("--tail-requests is for kvrouter replay only");
  });
});
