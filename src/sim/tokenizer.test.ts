import { describe, expect, it } from "vitest";
import { TextGenerator } from "./text-generator.js";
import { SimTokenizer, SPECIAL_TOKENS, VOCAB_SIZE } from "./tokenizer.js";

describe("SimTokenizer", () => {
  it("is deterministic across instances and keeps shared text prefixes as shared id prefixes", () => {
    const a = new SimTokenizer().encode("Hello, world! The cache is warm today.");
    const b = new SimTokenizer().encode("Hello, world! The cache is warm today.");
    expect(a).toEqual(b);
    const c = new SimTokenizer().encode("Hello, world! The cache is cold.");
    expect(c.slice(0, 7)).toEqual(a.slice(0, 7));
    expect(c[7]).not.toBe(a[7]);
    for (const id of a) expect(id >= 0 && id < VOCAB_SIZE).toBe(true);
  });

  it("round-trips text it has seen and splits long words", () => {
    const t = new SimTokenizer();
    const text = "  supercalifragilistic words, and\tnumbers 12345.";
    const ids = t.encode(text);
    expect(t.decode(ids)).toBe(text);
    expect(ids.length).toBeGreaterThan(7);
  });

  it("renders chat messages through a fixed template with special tokens", () => {
    const t = new SimTokenizer();
    const ids = t.encode(t.renderChat([{ role: "user", content: "hi" }]));
    expect(ids[0]).toBe(SPECIAL_TOKENS["<|begin_of_text|>"]);
    expect(ids).toContain(SPECIAL_TOKENS["<|eot_id|>"]);
    expect(ids.at(-2)).toBe(SPECIAL_TOKENS["<|end_header_id|>"]);
  });
});

describe("TextGenerator", () => {
  it("continues a sequence deterministically with decodable words", () => {
    const t = new SimTokenizer();
    const g = new TextGenerator(t);
    const seq = t.encode("once upon a time");
    const out: number[] = [];
    for (let i = 0; i < 8; i++) {
      const next = g.next([...seq, ...out]);
      out.push(next);
    }
    expect(new TextGenerator(new SimTokenizer()).next(seq)).toBe(out[0]);
    expect(t.decode(out)).toMatch(/^( \w+|[.,])+$/);
  });
});
