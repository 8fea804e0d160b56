import { describe, expect, it } from "vitest";
import { PredictionCheck, type PredictionOutcome } from "./prediction-check.js";

function setup(nowMs: () => number = () => 0) {
  const observed: [string, number, PredictionOutcome][] = [];
  const warned: string[] = [];
  const logs: Record<string, unknown>[] = [];
  const log = (o: Record<string, unknown>, msg?: string) => logs.push({ ...o, msg });
  const check = new PredictionCheck(
    { warnRatio: 0.5, warnIntervalMs: 1000, window: 10, minSamples: 4, nowMs },
    { observe: (w, e, o) => observed.push([w, e, o]), warned: (w) => warned.push(w) },
    { debug: log, info: log, warn: log, error: log },
  );
  return { check, observed, warned, logs };
}

const sample = (predicted: number, actual: number) => ({
  worker: "w#0",
  predicted,
  actual,
  promptTokens: 200,
  blockSize: 16,
});

describe("PredictionCheck", () => {
  it("classifies: within one block is a match, else over / under", () => {
    const { check, observed } = setup();
    expect(check.record(sample(192, 176))).toBe("match"); // vLLM recomputes the last block
    expect(check.record(sample(96, 0))).toBe("over");
    expect(check.record(sample(0, 96))).toBe("under");
    expect(observed.map((o) => o[1])).toEqual([-16, -96, 96]);
  });

  it("warns once per interval when most recent checks are wrong, naming what to check", () => {
    let now = 0;
    const { check, warned, logs } = setup(() => now);
    for (let i = 0; i < 3; i++) check.record(sample(0, 160));
    expect(warned).toEqual([]); // fewer than minSamples
    check.record(sample(0, 160));
    expect(warned).toEqual(["w#0"]);
    expect(String(logs[0]!.hint)).toContain("PYTHONHASHSEED");
    for (let i = 0; i < 5; i++) check.record(sample(0, 160));
    expect(warned).toHaveLength(1); // rate-limited
    now = 1000;
    check.record(sample(0, 160));
    expect(warned).toHaveLength(2);
  });

  it("stays silent while predictions are right", () => {
    const { check, warned } = setup();
    for (let i = 0; i < 20; i++) check.record(sample(160, 160));
    check.record(sample(0, 160)); // one wrong in a window of ten
    expect(warned).toEqual([]);
  });
});
