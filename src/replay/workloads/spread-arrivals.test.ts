import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseTrace } from "../trace.js";
import { arrivalGrid, arrivalStats, spreadArrivals } from "./spread-arrivals.js";
import { TraceUsageError } from "./trace-args.js";
import { parseSpreadArgs, runSpread } from "./trace-spread-main.js";

/** A trace on a 3 s grid: bursts of `size` requests at 0, 3000, 6000 … (ids in file order). */
const burst = (groups: number, size: number) =>
  Array.from({ length: groups * size }, (_, i) => ({
    timestamp: 3000 * Math.floor(i / size),
    input_length: 512,
    output_length: 10,
    hash_ids: [i],
  }));

describe("trace spread", () => {
  it("spreads each burst within its own quantum, keeping file order and every other field", () => {
    const lines = burst(50, 12);
    expect(arrivalGrid(lines)).toBe(3000);
    const out = spreadArrivals(lines, 3000, 7);
    expect(out.map((l) => l.hash_ids)).toEqual(lines.map((l) => l.hash_ids)); // order kept
    for (let i = 0; i < out.length; i++) {
      const t0 = lines[i]!.timestamp;
      expect(out[i]!.timestamp).toBeGreaterThanOrEqual(t0);
      expect(out[i]!.timestamp).toBeLessThan(t0 + 3000);
      expect(Number.isInteger(out[i]!.timestamp)).toBe(true);
      expect({ ...out[i]!, timestamp: 0 }).toEqual({ ...lines[i]!, timestamp: 0 });
      if (i > 0) expect(out[i]!.timestamp).toBeGreaterThanOrEqual(out[i - 1]!.timestamp);
    }
    expect(arrivalStats(lines)).toEqual({ distinct: 50, sameAsPrevious: 550, largestGroup: 12 });
    expect(arrivalStats(out).sameAsPrevious).toBeLessThan(10);
    expect(spreadArrivals(lines, 3000, 7)).toEqual(out); // deterministic for a seed
    expect(spreadArrivals(lines, 3000, 8)).not.toEqual(out);
    // A window wider than the grid is cut at the next distinct timestamp (the last
    // burst has none: it gets the whole window).
    const wide = spreadArrivals(lines, 60_000, 7);
    for (let i = 0; i < wide.length; i++) {
      const bound = i < wide.length - 12 ? 3000 : 60_000;
      expect(wide[i]!.timestamp).toBeLessThan(lines[i]!.timestamp + bound);
    }
    expect(spreadArrivals(lines, 0, 7)).toEqual(lines);
  });

  it("writes a trace the replay reads, and refuses a bad line naming it", () => {
    const dir = mkdtempSync(join(tmpdir(), "spread-"));
    const inFile = join(dir, "in.jsonl");
    const outFile = join(dir, "out.jsonl");
    writeFileSync(
      inFile,
      `${burst(4, 5)
        .map((l) => JSON.stringify(l))
        .join("\n")}\n`,
    );
    const err: string[] = [];
    const o = parseSpreadArgs(["spread", inFile, "--out", outFile])!;
    expect(o.windowMs).toBeNull();
    expect(runSpread(o, (s) => err.push(s))).toBe(0);
    expect(err.join("")).toContain("window 3000 ms");
    const spread = parseTrace(readFileSync(outFile, "utf8"));
    expect(spread).toHaveLength(20);
    expect(new Set(spread.map((r) => r.arrivalMs)).size).toBeGreaterThan(15);

    writeFileSync(
      inFile,
      '{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [0]}\nnope\n',
    );
    expect(runSpread(o, (s) => err.push(s))).toBe(1);
    expect(err.at(-1)).toMatch(/line 2/);
    expect(() => parseSpreadArgs(["spread", inFile, "--window-ms", "-1"])).toThrow(TraceUsageError);
    expect(() => parseSpreadArgs(["spread"])).toThrow("FILE is required");
    expect(runSpread({ ...o, file: join(dir, "missing.jsonl") }, (s) => err.push(s))).toBe(1);
    expect(err.at(-1)).toMatch(/cannot read .*missing\.jsonl/);
  });
});
