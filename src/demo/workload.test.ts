import { describe, expect, it } from "vitest";
import { QUICK_WORKLOAD } from "./demo-options.js";
import { generateWorkload, textOf } from "./workload.js";

describe("generateWorkload", () => {
  it("is a pure function of the shape and seed", () => {
    expect(generateWorkload(QUICK_WORKLOAD, 5)).toEqual(generateWorkload(QUICK_WORKLOAD, 5));
    expect(generateWorkload(QUICK_WORKLOAD, 5)).not.toEqual(generateWorkload(QUICK_WORKLOAD, 6));
  });

  it("respects every range of the shape", () => {
    const s = QUICK_WORKLOAD;
    const w = generateWorkload(s, 1);
    const within = (x: number, [lo, hi]: readonly [number, number]) => x >= lo && x <= hi;
    expect(w.systemPrompts).toHaveLength(s.systemPrompts);
    for (const p of w.systemPrompts) expect(within(p.length, s.systemTokens)).toBe(true);
    expect(w.conversations).toHaveLength(s.conversations);
    let requests = 0;
    let last = 0;
    for (const c of w.conversations) {
      expect(c.startMs).toBeGreaterThanOrEqual(last);
      last = c.startMs;
      expect(c.startMs).toBeLessThan(s.arrivalWindowMs);
      expect(c.systemPrompt).toBeLessThan(s.systemPrompts);
      expect(within(c.turns.length, s.turns)).toBe(true);
      for (const [i, t] of c.turns.entries()) {
        expect(within(t.userTokens.length, s.userTokens)).toBe(true);
        expect(within(t.maxTokens, s.replyTokens)).toBe(true);
        expect(i === 0 ? t.thinkMs === 0 : within(t.thinkMs, s.thinkMs)).toBe(true);
      }
      requests += c.turns.length;
    }
    expect(w.requests).toBe(requests);
  });
});

describe("textOf", () => {
  it("is deterministic words, and a longer token list extends the text", () => {
    const a = textOf([1, 2, 3, 300]);
    expect(a).toBe(textOf([1, 2, 3, 300]));
    expect(a.split(" ")).toHaveLength(4);
    expect(textOf([1, 2])).not.toBe(textOf([2, 1]));
  });
});
