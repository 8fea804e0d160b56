/**
 * `kv_rate`: the router told the workers' prefill rate (`inFlight.prefillTokensPerSec`)
 * counts a prefill in progress by what is left of it. A follower arriving near the end of
 * its prompt's first prefill then waits for it instead of recomputing the prompt on an
 * idle worker; the router without the rate counts the whole prefill as still queued and
 * duplicates it (docs/replay.md, "kv with the prefill rate").
 */

import { describe, expect, it } from "vitest";
import { rateConfig, runJob } from "./compare.js";
import { tailRunOptions, traceAt } from "./test-helpers.js";
import { DEFAULT_TIMING } from "./timing-model.js";

// A 10,400-token prompt at 0 s (2.02 s of prefill at 5,200 tokens/s + 20 ms), and at
// 1.9 s a follower sharing its first 10,240 tokens, 300 of its own.
const first = Array.from({ length: 21 }, (_, i) => i + 1);
const trace = [traceAt(0, 0, 10_400, first), traceAt(1, 1.9, 10_540, [...first.slice(0, 20), 99])];

describe("kv_rate: a prefill in progress counts by what is left", () => {
  it("keeps the follower with its prompt's first prefill; kv without the rate recomputes it", () => {
    const run = (policy: "kv" | "kv_rate") => {
      const r = runJob(
        trace,
        policy,
        tailRunOptions({
          workers: 2,
          policy,
          timing: DEFAULT_TIMING,
          capacityBlocks: null,
          reference: false,
        }),
      );
      const d = r.tailData!;
      return { workers: [...d.worker], hit: d.hitTokens[1]!, ttftMs: d.ttftMs[1]! };
    };
    const kv = run("kv");
    const rate = run("kv_rate");
    expect(kv.workers[1]).not.toBe(kv.workers[0]);
    expect(kv.hit).toBe(0);
    expect(kv.ttftMs).toBeGreaterThan(2000);
    expect(rate.workers[1]).toBe(rate.workers[0]);
    expect(rate.hit).toBe(10_240);
    // Waits the 120 ms left of the first prefill, then 20 ms + 300 tokens.
    expect(rate.ttftMs).toBeCloseTo(120 + 20 + (300 / 5_200) * 1000, 3);
  });

  it("charges the per-request overhead as the queue weight, in blocks at the rate", () => {
    const o = tailRunOptions({
      workers: 2,
      policy: "kv_rate",
      timing: DEFAULT_TIMING,
      capacityBlocks: null,
      reference: false,
    });
    expect(rateConfig(o).weights.queue).toBeCloseTo(6.5, 12);
    expect(rateConfig(o).weights.prefill).toBe(o.scheduler.weights.prefill);
  });
});
