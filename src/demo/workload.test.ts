import { describe, expect, it } from "vitest";
import { SimTokenizer } from "../sim/tokenizer.js";
import { QUICK_WORKLOAD } from "./demo-options.js";
import { generateWorkload, PromptBuilder } from "./workload.js";

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

describe("PromptBuilder", () => {
  const tokenizer = new SimTokenizer();
  const builder = new PromptBuilder(tokenizer);

  it("lays the chat template's segments around the content", () => {
    const sys = [11, 12, 13];
    const user = [21, 22];
    const p = builder.first(sys, user);
    const assistant = tokenizer.encode("<|start_header_id|>assistant<|end_header_id|>\n\n");
    const at = (xs: number[]) => p.findIndex((_, i) => xs.every((x, j) => p[i + j] === x));
    expect(p[0]).toBe(tokenizer.encode("<|begin_of_text|>")[0]);
    expect(at(sys)).toBeGreaterThan(0);
    expect(at(user)).toBeGreaterThan(at(sys) + sys.length);
    expect(p.slice(-assistant.length)).toEqual(assistant);
  });

  it("extends the previous prompt and reply, so a follow-up shares their prefix", () => {
    const first = builder.first([1, 2, 3], [4, 5]);
    const next = builder.next(first, [6, 7], [8]);
    expect(next.slice(0, first.length + 2)).toEqual([...first, 6, 7]);
    expect(next.length).toBeGreaterThan(first.length + 3);
  });
});
