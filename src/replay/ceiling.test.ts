import { describe, expect, it } from "vitest";
import { infiniteCacheCeiling, maxHitTokens, sharedPageTokens } from "./ceiling.js";
import type { TraceRequest } from "./trace.js";

const req = (index: number, inputLength: number, hashIds: number[]): TraceRequest => ({
  index,
  arrivalMs: index,
  inputLength,
  outputLength: 1,
  hashIds,
});

describe("infiniteCacheCeiling", () => {
  const reqs = [
    req(0, 1000, [0, 1]),
    req(1, 1100, [0, 1, 2]),
    req(2, 300, [0]),
    req(3, 1024, [0, 1]),
  ];

  it("counts leading trace blocks seen before and the whole pages they share", () => {
    const c = infiniteCacheCeiling(reqs, { blockSize: 16 });
    // blocks: r1 hits [0,1], r2 hits [0], r3 hits [0,1].
    expect(c.blockHits).toBe(5);
    expect(c.blocks).toBe(8);
    // tokens: r1 shares 1000 tokens with r0 → 992 (62 pages); r2 shares 300 → capped at
    // 288 (the last token is always computed); r3 shares 1024 with r1 → capped at 1008.
    expect(c.tokenHits).toBe(992 + 288 + 1008);
    expect(c.tokens).toBe(1000 + 1100 + 300 + 1024);
  });

  it("splits requests over private caches round-robin", () => {
    const c = infiniteCacheCeiling(reqs, { workers: 2, blockSize: 16 });
    // cache 0 gets r0, r2 (shares 300 → 288); cache 1 gets r1, r3 (shares 1024 → 1008).
    expect(c.tokenHits).toBe(288 + 1008);
    expect(c.blockHits).toBe(1 + 2);
  });

  it("caps hits below the prompt length", () => {
    expect(maxHitTokens(32, 16)).toBe(16);
    expect(maxHitTokens(33, 16)).toBe(32);
    expect(maxHitTokens(1, 16)).toBe(0);
  });

  it("shares whole pages of the shorter prefix, never the last token", () => {
    expect(sharedPageTokens(2, 5000, 3000, 16)).toBe(1024); // two trace blocks
    expect(sharedPageTokens(2, 700, 3000, 16)).toBe(688); // the other prompt ends first
    expect(sharedPageTokens(2, 5000, 1000, 16)).toBe(992); // its own last token
  });
});
