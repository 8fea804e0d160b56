import { describe, expect, it } from "vitest";
import { blockTokens, requestTokens, VOCAB_SIZE } from "./tokens.js";

describe("token derivation", () => {
  it("gives the same 512 tokens for the same hash_id, different ones for others", () => {
    const a = blockTokens(42);
    expect(a).toHaveLength(512);
    expect(blockTokens(42)).toEqual(a);
    const b = blockTokens(43);
    let same = 0;
    for (let i = 0; i < 512; i++) if (a[i] === b[i]) same++;
    expect(same).toBeLessThan(5);
    expect(Math.max(...a)).toBeLessThan(VOCAB_SIZE);
    expect(Math.min(...a)).toBeGreaterThanOrEqual(0);
  });

  it("handles ids beyond 32 bits", () => {
    expect(blockTokens(2 ** 40 + 1)).not.toEqual(blockTokens(1));
  });

  it("lays blocks back to back and cuts the last one to the input length", () => {
    const t = requestTokens({ inputLength: 700, hashIds: [0, 9] });
    expect(t).toHaveLength(700);
    expect(t.slice(0, 512)).toEqual(blockTokens(0));
    expect(t.slice(512)).toEqual(blockTokens(9).slice(0, 188));
  });

  it("makes prompts share tokens exactly as far as their hash_ids agree", () => {
    const a = requestTokens({ inputLength: 1500, hashIds: [0, 1, 2] });
    const b = requestTokens({ inputLength: 1400, hashIds: [0, 1, 3] });
    let common = 0;
    while (a[common] === b[common]) common++;
    expect(common).toBeGreaterThanOrEqual(1024);
    expect(common).toBeLessThan(1030);
  });
});
