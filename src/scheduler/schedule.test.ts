import { describe, expect, it } from "vitest";
import { resolveSchedulerConfig, SchedulerConfigError, withOverrides } from "./config.js";
import { DEFAULT_SCHEDULER_CONFIG } from "./defaults.js";
import { schedule } from "./schedule.js";
import { cand, seededRng } from "./test-helpers.js";
import type { CandidateInput, SchedulerConfig } from "./types.js";

const cfg = (over: Parameters<typeof resolveSchedulerConfig>[0] = {}): SchedulerConfig =>
  resolveSchedulerConfig({
    weights: { prefill: 1, pending: 1, decode: 1, queue: 2, host: 0.25, disk: 0.5, store: 0.75 },
    temperature: 0,
    outlierStdK: 2,
    kvHardCap: 0.95,
    ...over,
  });
const input = (candidates: CandidateInput[], promptTokens = 160) => ({
  promptTokens,
  promptBlocks: Math.floor(promptTokens / 16),
  blockSize: 16,
  candidates,
});
const zero = () => 0;

describe("schedule", () => {
  it("prefers the worker holding the prefix, and explains every candidate", () => {
    const r = schedule(
      input([cand("a"), cand("b", { overlap: { gpu: 8, host: 8, disk: 8 } })]),
      cfg(),
      zero,
    );
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.chosen).toBe("b#0");
    expect(r.reason).toBe("lowest_cost");
    expect(r.candidates.map((c) => [c.worker, c.totalCost, c.probability, c.excluded])).toEqual([
      ["a#0", 10, 0, null],
      ["b#0", 2, 1, null],
    ]);
  });

  it("trades cache overlap against load", () => {
    const cached = cand("cached", {
      overlap: { gpu: 8, host: 8, disk: 8 },
      load: { activeBlocks: 50 },
    });
    const idle = cand("idle", { load: { activeBlocks: 10 } });
    const r = schedule(input([cached, idle]), cfg(), zero);
    // cached: 2 + 50 = 52; idle: 10 + 10 = 20
    expect(r.ok && r.chosen).toBe("idle#0");
    const decodeCheap = schedule(input([cached, idle]), cfg({ weights: { decode: 0.1 } }), zero);
    expect(decodeCheap.ok && decodeCheap.chosen).toBe("cached#0");
  });

  it("counts waiting requests and pending prefill", () => {
    const busy = cand("busy", { load: { waiting: 4 } });
    const prefilling = cand("prefilling", { load: { pendingPrefillTokens: 16 * 6 } });
    const r = schedule(input([busy, prefilling]), cfg(), zero);
    // busy: 10 + 8; prefilling: 10 + 6
    expect(r.ok && r.chosen).toBe("prefilling#0");
  });

  it("reports ties and picks among them with the rng", () => {
    const cs = [cand("a"), cand("b"), cand("c", { load: { waiting: 1 } })];
    const first = schedule(input(cs), cfg(), () => 0);
    const second = schedule(input(cs), cfg(), () => 0.9);
    expect(first.ok && [first.chosen, first.reason]).toEqual(["a#0", "lowest_cost_tie"]);
    expect(second.ok && second.chosen).toBe("b#0");
    expect(first.ok && first.candidates.map((c) => c.probability)).toEqual([0.5, 0.5, 0]);
  });

  it("samples above temperature 0 (distribution checked with a seeded rng)", () => {
    const cs = [cand("a", { overlap: { gpu: 10, host: 10, disk: 10 } }), cand("b")];
    const rng = seededRng(3);
    let b = 0;
    let p = 0;
    for (let i = 0; i < 4000; i++) {
      const r = schedule(input(cs), cfg({ temperature: 1 }), rng);
      if (!r.ok) throw new Error("unexpected");
      expect(r.reason).toBe("sampled");
      if (r.chosen === "b#0") b++;
      p = r.candidates[1]!.probability;
    }
    expect(p).toBeCloseTo(Math.exp(-1) / (1 + Math.exp(-1)), 12);
    const sigma = Math.sqrt(4000 * p * (1 - p));
    expect(Math.abs(b - 4000 * p)).toBeLessThan(5 * sigma);
  });

  it("excludes KV outliers above mean + k·std and above the hard cap", () => {
    const cs = [
      ...["a", "b", "c", "d", "e", "f"].map((id) => cand(id, { load: { kvLoad: 0.3 } })),
      cand("hot", { overlap: { gpu: 10, host: 10, disk: 10 }, load: { kvLoad: 0.9 } }),
      cand("capped", { overlap: { gpu: 10, host: 10, disk: 10 }, load: { kvLoad: 0.96 } }),
    ];
    const r = schedule(input(cs), cfg({ outlierStdK: 1, kvHardCap: 0.95 }), zero);
    if (!r.ok) throw new Error("unexpected");
    expect(r.candidates.find((c) => c.worker === "hot#0")!.excluded).toBe("kv_outlier");
    expect(r.candidates.find((c) => c.worker === "capped#0")!.excluded).toBe("kv_hard_cap");
    expect(r.chosen).not.toBe("hot#0");
    expect(r.kvMean).toBeCloseTo((6 * 0.3 + 0.9 + 0.96) / 8, 12);
    // With exclusion off the cached worker wins.
    const off = schedule(input(cs), cfg({ outlierStdK: Infinity, kvHardCap: Infinity }), zero);
    expect(off.ok && ["hot#0", "capped#0"]).toContain(off.ok && off.chosen);
  });

  it("does not apply KV exclusion when it would exclude everyone", () => {
    const cs = [cand("a", { load: { kvLoad: 0.97 } }), cand("b", { load: { kvLoad: 0.99 } })];
    const r = schedule(input(cs), cfg({ kvHardCap: 0.95 }), zero);
    if (!r.ok) throw new Error("unexpected");
    expect(r.fallbacks.kvExclusionSkipped).toBe(true);
    expect(r.candidates.every((c) => c.excluded === null)).toBe(true);
  });

  it("excludes stale workers while a fresh one exists", () => {
    const cs = [
      cand("stale", { stale: true, overlap: { gpu: 10, host: 10, disk: 10 } }),
      cand("fresh"),
    ];
    const r = schedule(input(cs), cfg(), zero);
    if (!r.ok) throw new Error("unexpected");
    expect(r.chosen).toBe("fresh#0");
    expect(r.reason).toBe("only_candidate");
    expect(r.candidates[0]!.excluded).toBe("stale");
    expect(r.candidates[0]!.stale).toBe(true);
  });

  it("keeps and penalises stale workers when every worker is stale", () => {
    const cs = [
      cand("a", { stale: true, overlap: { gpu: 10, host: 10, disk: 10 } }),
      cand("b", { stale: true }),
    ];
    const r = schedule(input(cs), cfg({ stalePenalty: 5 }), zero);
    if (!r.ok) throw new Error("unexpected");
    expect(r.fallbacks.allStale).toBe(true);
    expect(r.chosen).toBe("a#0");
    expect(r.candidates.map((c) => [c.excluded, c.stalePenalty, c.totalCost])).toEqual([
      [null, 5, 5],
      [null, 5, 15],
    ]);
  });

  it("with the penalise policy keeps stale workers at a cost", () => {
    const cs = [
      cand("stale", { stale: true, overlap: { gpu: 10, host: 10, disk: 10 } }),
      cand("fresh"),
    ];
    const cheap = schedule(input(cs), cfg({ stalePolicy: "penalise", stalePenalty: 5 }), zero);
    expect(cheap.ok && cheap.chosen).toBe("stale#0");
    const dear = schedule(input(cs), cfg({ stalePolicy: "penalise", stalePenalty: 50 }), zero);
    expect(dear.ok && dear.chosen).toBe("fresh#0");
  });

  it("returns a typed error without candidates", () => {
    const r = schedule(input([]), cfg(), zero);
    expect(r).toMatchObject({ ok: false, error: { code: "no_candidates" }, candidates: [] });
  });

  it("applies per-request overrides without changing the base config", () => {
    const base = cfg();
    const cs = [
      cand("host", { overlap: { gpu: 0, host: 10, disk: 10 }, load: { activeBlocks: 1 } }),
      cand("idle"),
    ];
    // host: 10 × 0.25 + 1 = 3.5; idle: 10. With host = 1: 11 vs 10.
    expect(schedule(input(cs), base, zero)).toMatchObject({ chosen: "host#0" });
    const o = withOverrides(base, { host: 1 });
    expect(schedule(input(cs), o, zero)).toMatchObject({ chosen: "idle#0" });
    expect(base.weights.host).toBe(0.25);
    expect(withOverrides(base, undefined)).toBe(base);
    expect(withOverrides(base, {})).toBe(base);
    expect(withOverrides(base, { temperature: 2 }).temperature).toBe(2);
  });
});

describe("scheduler config", () => {
  it("fills defaults and freezes", () => {
    const c = resolveSchedulerConfig();
    expect(c).toEqual(DEFAULT_SCHEDULER_CONFIG);
    expect(Object.isFrozen(c) && Object.isFrozen(c.weights)).toBe(true);
  });

  it("names the bad key", () => {
    const key = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        return e instanceof SchedulerConfigError ? e.key : "other";
      }
      return "none";
    };
    expect(key(() => resolveSchedulerConfig({ weights: { host: 1.5 } }))).toBe("weights.host");
    expect(key(() => resolveSchedulerConfig({ weights: { decode: -1 } }))).toBe("weights.decode");
    expect(key(() => resolveSchedulerConfig({ temperature: Number.NaN }))).toBe("temperature");
    expect(key(() => resolveSchedulerConfig({ kvHardCap: 0 }))).toBe("kvHardCap");
    expect(key(() => resolveSchedulerConfig({ stalePolicy: "drop" as never }))).toBe("stalePolicy");
    expect(key(() => withOverrides(DEFAULT_SCHEDULER_CONFIG, { temperature: -1 }))).toBe(
      "overrides.temperature",
    );
    expect(key(() => withOverrides(DEFAULT_SCHEDULER_CONFIG, { bogus: 1 } as never))).toBe(
      "overrides.bogus",
    );
    expect(resolveSchedulerConfig({ outlierStdK: Infinity, kvHardCap: Infinity }).kvHardCap).toBe(
      Infinity,
    );
  });
});
