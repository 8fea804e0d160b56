import { describe, expect, it } from "vitest";
import { backlogPendingWeight, SPREAD_MIN_SAVING } from "./backlog.js";
import { DEFAULT_SCHEDULER_CONFIG } from "./defaults.js";
import { schedule } from "./schedule.js";
import { cand } from "./test-helpers.js";

const zero = () => 0;
/** A 512-block (8,192-token) prompt whose first 510 blocks `holder` has cached. */
const hot = (holderPending: number, otherPending: number) => ({
  promptTokens: 8_192,
  promptBlocks: 512,
  blockSize: 16,
  candidates: [
    cand("holder", {
      overlap: { gpu: 510, host: 510, disk: 510 },
      load: { pendingPrefillTokens: holderPending },
    }),
    cand("other", { load: { pendingPrefillTokens: otherPending } }),
  ],
});

describe("backlog-weighted queued prefill", () => {
  it("is 1/(1+λmin) with an idle eligible worker, 1/(1+k) with k prompts of backlog everywhere", () => {
    const cs = hot(100_000, 0).candidates;
    expect(backlogPendingWeight(cs, [true, true], 512, 16, 0.05)).toBe(1 / (1 + SPREAD_MIN_SAVING));
    expect(backlogPendingWeight(cs, [true, true], 512, 16, 0.05, 0)).toBe(1);
    const busy = hot(100_000, 2 * 8_192).candidates;
    expect(backlogPendingWeight(busy, [true, true], 512, 16, 0.05)).toBeCloseTo(1 / 3, 9);
    expect(backlogPendingWeight(busy, [true, true], 512, 16, 0.5)).toBe(0.5); // floor
    // Only eligible workers count: the idle one excluded → the holder's backlog decides.
    expect(backlogPendingWeight(cs, [true, false], 512, 16, 0.05)).toBeCloseTo(
      1 / (1 + 100_000 / 8_192),
      9,
    );
  });

  it("a hot prefix gains a holder when waiting behind it costs more than recomputing", () => {
    // 10,000 blocks (160k tokens, ~31 s) queued on the holder, the other worker idle:
    // with the fixed 0.05 weight the cached prefix outweighed that queue.
    const r = schedule(hot(160_000, 0), DEFAULT_SCHEDULER_CONFIG, zero);
    expect(r.ok && r.chosen).toBe("other#0");
    // A short queue (less than the prefix's own prefill) keeps the request on the holder.
    const s = schedule(hot(4_000, 0), DEFAULT_SCHEDULER_CONFIG, zero);
    expect(s.ok && s.chosen).toBe("holder#0");
  });

  it("λ sets how much waiting a recomputation must save: weight 1/(1 + λ) with an idle worker", () => {
    const cs = hot(520 * 16, 0).candidates;
    expect(backlogPendingWeight(cs, [true, true], 512, 16, 0.05, 0.25)).toBeCloseTo(0.8, 9);
    // Backlog above λ decides: 2 prompts queued everywhere → 1/3 whatever λ ≤ 2.
    const busy = hot(100_000, 2 * 8_192).candidates;
    expect(backlogPendingWeight(busy, [true, true], 512, 16, 0.05, 0.25)).toBeCloseTo(1 / 3, 9);
  });

  it("with every worker backed up, the request still waits behind its cache", () => {
    // Holder 160k tokens queued, the other 100k: backlog ≈ 12 prompts, weight ≈ 0.077;
    // 0.077·(10,000 − 6,250) ≈ 289 blocks < 510 blocks of recompute: stay.
    const r = schedule(hot(160_000, 100_000), DEFAULT_SCHEDULER_CONFIG, zero);
    expect(r.ok && r.chosen).toBe("holder#0");
  });
});
