/**
 * `earliest_first_token` (the yardstick that knows the present): its choices on a trace
 * worked out by hand (and the longest prompt kept per block, not the first), and its
 * copy of the fleet's state exact on random traces with unlimited caches and slots to
 * spare — every first token where it expected it.
 */

import { describe, expect, it } from "vitest";
import { runJob } from "./compare.js";
import { EarliestFirstTokenPolicy } from "./earliest-first-token.js";
import { runReplay } from "./run-replay.js";
import { randomTrace, tailRunOptions, traceAt } from "./test-helpers.js";

// 1,000 tokens/s and 500 ms per prefill: a prompt of t uncached tokens takes 500 + t ms.
const timing = {
  prefillTokensPerSec: 1000,
  prefillOverheadMs: 500,
  decodeMsPerToken: 25,
  maxNumSeqs: 64,
};

const opts = tailRunOptions({
  workers: 2,
  policy: "earliest_first_token",
  timing,
  capacityBlocks: null,
  reference: false,
});

const at = traceAt;

describe("earliest_first_token", () => {
  it("sends each request where its first token comes soonest, worked out by hand", () => {
    const trace = [
      // A at 0: both workers free, 3.5 s on either: w0 (the first of equals).
      at(0, 0, 3000, [1, 2, 3, 4, 5, 6]),
      // B at 1 s, A's 3,000 tokens (2,992 in pages) + 100: on w0 after A, 3.5 + 0.608 =
      // 4.108 s; cold on w1, 1 + 3.6 = 4.6 s → w0, TTFT 3.108 s (waits for the cache).
      at(1, 1, 3100, [1, 2, 3, 4, 5, 6, 7]),
      // C at 1 s, 200 new tokens: w0 after B, 4.808 s; w1 free, 1.7 s → w1.
      at(2, 1, 200, [50]),
      // D at 1.2 s, B's prefix again + 2,000 new tokens (5,100): w0 after B, 4.108 +
      // 0.5 + (5,100 − 3,088) / 1,000 = 6.62 s; w1 after C (1.7 s) cold: 1.7 + 5.6 =
      // 7.3 s → w0.
      at(3, 1.2, 5100, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]),
    ];
    const d = runJob(trace, "earliest_first_token", opts).tailData!;
    expect(Array.from(d.worker)).toEqual([0, 0, 1, 0]);
    expect(Array.from(d.ttftMs, (x) => Math.round(x))).toEqual([3500, 3108, 700, 5420]);
  });

  it("keeps the longest prompt through each block, not the first", () => {
    // One worker. A (300 tokens) then B (900 tokens, A's block then its own) both pass
    // through block 1. C at 100 s branches after block 1 (1,000 tokens): it shares min(512,
    // 900) = 512 tokens with B — the first prompt through block 1 alone would give 288.
    const p = new EarliestFirstTokenPolicy(1, timing, 16);
    p.choose(at(0, 0, 300, [1]), [], 0);
    p.choose(at(1, 0, 900, [1, 2]), [], 0);
    p.choose(at(2, 100, 1000, [1, 3]), [], 100_000);
    expect(p.expectedFirstTokenMs.get(2)).toBe(100_000 + 500 + (1000 - 512));
  });

  it("knows the fleet exactly with unlimited caches and slots to spare", () => {
    for (const seed of [1, 2, 3]) {
      const trace = randomTrace(seed, 120);
      let policy: EarliestFirstTokenPolicy | null = null;
      const run = runReplay(
        trace,
        (fleet) => {
          policy = new EarliestFirstTokenPolicy(fleet.size, timing, 16);
          return policy;
        },
        { ...opts, workers: 3 },
        { tail: true },
      );
      const d = run.tail!;
      expect(d.ttftMs.length).toBe(trace.length);
      let waited = 0;
      for (let k = 0; k < d.ttftMs.length; k++) {
        const expected = policy!.expectedFirstTokenMs.get(d.index[k]!)!;
        expect(d.arrivalMs[k]! + d.ttftMs[k]!).toBeCloseTo(expected, 6);
        if (d.waitMs[k]! > 0) waited++;
      }
      expect(waited).toBeGreaterThan(0); // queues formed: the free-at times were used
    }
  });
});
