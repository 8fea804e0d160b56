import { describe, expect, it } from "vitest";
import { backlogPendingWeight, OTHER_PREFIX_MIN_SAVING, SPREAD_MIN_SAVING } from "./backlog.js";
import { DEFAULT_SCHEDULER_CONFIG } from "./defaults.js";
import { schedule } from "./schedule.js";
import { cand } from "./test-helpers.js";

const zero = () => 0;
/** A 512-block (8,192-token) prompt whose first 510 blocks `holder` has cached. */
const hot = (holderPending: number, otherPending: number, holderSamePrefix?: number) => ({
  promptTokens: 8_192,
  promptBlocks: 512,
  blockSize: 16,
  candidates: [
    {
      ...cand("holder", {
        overlap: { gpu: 510, host: 510, disk: 510 },
        load: { pendingPrefillTokens: holderPending },
      }),
      ...(holderSamePrefix === undefined ? {} : { samePrefixPendingTokens: holderSamePrefix }),
    },
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

  it("a holder busy with other prefixes keeps the requests whose cache it holds", () => {
    // 2,500 blocks queued on the holder, the other worker idle, 512 blocks to recompute.
    // Queued by requests of *this* prefix (its demand outgrew one holder): spread.
    const own = schedule(hot(40_000, 0, 40_000), DEFAULT_SCHEDULER_CONFIG, zero);
    expect(own.ok && own.chosen).toBe("other#0");
    // The same queue from other prefixes: waiting there costs less than
    // (1 + OTHER_PREFIX_MIN_SAVING)× the recomputation, so the request stays.
    expect(2_500 / (1 + OTHER_PREFIX_MIN_SAVING)).toBeLessThan(512);
    const others = schedule(hot(40_000, 0, 0), DEFAULT_SCHEDULER_CONFIG, zero);
    expect(others.ok && others.chosen).toBe("holder#0");
    // Mostly other prefixes, but this prefix's own share alone outweighs the recompute.
    const mixed = schedule(hot(40_000, 0, 9_000), DEFAULT_SCHEDULER_CONFIG, zero);
    expect(mixed.ok && mixed.chosen).toBe("other#0");
    // Other prefixes' queue above 9× the recompute (6,250 blocks / 9 ≈ 694 > 512): leave.
    const long = schedule(hot(100_000, 0, 0), DEFAULT_SCHEDULER_CONFIG, zero);
    expect(long.ok && long.chosen).toBe("other#0");
  });
});
