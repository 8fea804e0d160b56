import { describe, expect, it } from "vitest";
import { parseTrace } from "../trace.js";
import {
  defaultParams,
  generateWorkload,
  toJsonl,
  WORKLOAD_KINDS,
  type WorkloadKind,
  type WorkloadParams,
} from "./generators.js";
import { TraceUsageError } from "./trace-args.js";
import { parseTraceGenArgs } from "./trace-gen-main.js";

const gen = (kind: WorkloadKind, over: Partial<WorkloadParams> = {}) =>
  generateWorkload(kind, { ...defaultParams(kind), requests: 400, ...over });

/** Length of the common leading run of two id lists. */
function common(a: readonly number[], b: readonly number[]): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

describe("trace gen", () => {
  it.each(WORKLOAD_KINDS)("%s: valid Mooncake JSONL, deterministic per seed", (kind) => {
    const a = gen(kind);
    expect(a).toHaveLength(400);
    const parsed = parseTrace(toJsonl(a)); // throws on a malformed line
    expect(parsed).toHaveLength(400);
    expect(parsed[0]!.arrivalMs).toBe(0);
    expect(toJsonl(gen(kind))).toBe(toJsonl(a));
    expect(toJsonl(gen(kind, { seed: 2 }))).not.toBe(toJsonl(a));
  });

  it("rate sets the mean arrival rate", () => {
    for (const kind of WORKLOAD_KINDS) {
      const lines = gen(kind, { requests: 2_000, rate: 4 });
      const rate = (lines.length - 1) / (lines.at(-1)!.timestamp / 1000);
      expect(rate, kind).toBeGreaterThan(4 * 0.75);
      expect(rate, kind).toBeLessThan(4 * 1.33);
    }
  });

  it("shared-prefix and hot-prefix: every prompt starts with one of K system prompts", () => {
    const hot = gen("hot-prefix", { prompts: 3, systemTokens: 8_192 });
    const firsts = new Set(hot.map((l) => l.hash_ids.slice(0, 16).join(",")));
    expect(firsts.size).toBe(3);
    const shared = gen("shared-prefix", { prompts: 5 });
    expect(new Set(shared.map((l) => l.hash_ids[0])).size).toBe(5);
  });

  it("hot-prefix cold fraction gives unique prompts", () => {
    const lines = gen("hot-prefix", { prompts: 1, coldFraction: 0.5 });
    const counts = new Map<number, number>();
    for (const l of lines) counts.set(l.hash_ids[0]!, (counts.get(l.hash_ids[0]!) ?? 0) + 1);
    const hot = Math.max(...counts.values());
    expect(counts.size).toBe(lines.length - hot + 1); // every cold prompt is unique
    expect(hot).toBeGreaterThan(150);
    expect(hot).toBeLessThan(260);
  });

  it("chat: a session's next turn extends its previous prompt; popular prompts dominate", () => {
    const lines = gen("chat", { requests: 2_000 });
    // Some request's full blocks are a strict prefix of a later, longer request's ids.
    let extended = 0;
    const byFirst = new Map<number, number>();
    for (const l of lines) byFirst.set(l.hash_ids[0]!, (byFirst.get(l.hash_ids[0]!) ?? 0) + 1);
    const full = (l: (typeof lines)[number]) =>
      l.hash_ids.slice(0, Math.floor(l.input_length / 512));
    for (let i = 0; i < 300; i++) {
      const f = full(lines[i]!);
      if (f.length < 2) continue;
      if (
        lines
          .slice(i + 1)
          .some(
            (m) =>
              m.input_length > lines[i]!.input_length &&
              common(f, m.hash_ids) === f.length &&
              common(f, m.hash_ids) > 1,
          )
      )
        extended++;
    }
    expect(extended).toBeGreaterThan(30);
    const counts = [...byFirst.values()].sort((a, b) => b - a);
    expect(counts[0]!).toBeGreaterThan(3 * counts[Math.min(10, counts.length - 1)]!);
  });

  it("agentic: bursts of siblings share the context and arrive together", () => {
    const lines = gen("agentic", { requests: 1_000, fanoutProbability: 0.5 });
    let bursts = 0;
    for (let i = 1; i < lines.length; i++) {
      const a = lines[i - 1]!;
      const b = lines[i]!;
      if (b.timestamp - a.timestamp <= 10 && common(a.hash_ids, b.hash_ids) >= 10) bursts++;
    }
    expect(bursts).toBeGreaterThan(50);
    const mean = lines.reduce((s, l) => s + l.input_length, 0) / lines.length;
    expect(mean).toBeGreaterThan(8_000); // long, growing contexts
  });

  it("flags: parsed onto the kind's defaults; a bad one names itself", () => {
    const o = parseTraceGenArgs(["gen", "chat", "--requests", "50", "--zipf", "0.8"])!;
    expect(o.params.requests).toBe(50);
    expect(o.params.zipf).toBe(0.8);
    expect(o.params.turns).toBe(defaultParams("chat").turns);
    expect(() => parseTraceGenArgs(["gen", "nope"])).toThrow(TraceUsageError);
    expect(() => parseTraceGenArgs(["gen", "chat", "--rate", "0"])).toThrow(/--rate/);
    expect(() => parseTraceGenArgs(["gen", "hot-prefix", "--cold-fraction", "2"])).toThrow(
      /--cold-fraction/,
    );
  });
});
