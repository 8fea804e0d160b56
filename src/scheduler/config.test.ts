import { describe, expect, it } from "vitest";
import { checkSchedulerConfig, resolveSchedulerConfig } from "./config.js";
import { DEFAULT_SCHEDULER_CONFIG } from "./defaults.js";

describe("checkSchedulerConfig", () => {
  it("reports every bad key, not only the first", () => {
    const r = checkSchedulerConfig({
      temperature: -1,
      kvHardCap: 0,
      weights: { host: 2, prefill: Number.NaN },
    } as never);
    expect(r.ok).toBe(false);
    expect(!r.ok && r.errors.map((e) => e.key)).toEqual([
      "weights.prefill",
      "weights.host",
      "temperature",
      "kvHardCap",
    ]);
  });

  it("takes defaults for absent keys only: null is a bad value, quoted strings show", () => {
    expect(resolveSchedulerConfig({})).toEqual(DEFAULT_SCHEDULER_CONFIG);
    const r = checkSchedulerConfig({ temperature: null, stalePenalty: "" } as never);
    expect(!r.ok && r.errors.map((e) => e.message)).toEqual([
      "temperature must be a number in 0..1000000, got null",
      'stalePenalty must be a finite number ≥ 0, got ""',
    ]);
  });
});
