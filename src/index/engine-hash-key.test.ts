import { describe, expect, it } from "vitest";
import {
  type EngineBlockHash,
  engineHashFromString,
  engineHashFromU32Pair,
} from "../protocol/engine-hash.js";
import { EngineHashKeys, KIND_INT, KIND_INTERNED } from "./engine-hash-key.js";

const h = (s: string) => s as EngineBlockHash;

describe("EngineHashKeys.parse", () => {
  it("parses 16 lowercase hex digits into (hi, lo) exactly", () => {
    const keys = new EngineHashKeys();
    for (const [hi, lo] of [
      [0, 0],
      [0, 1],
      [0xffffffff, 0xffffffff],
      [0x80000000, 0x7fffffff],
      [0x0123abcd, 0xfedc9876],
    ] as const) {
      expect(keys.parse(engineHashFromU32Pair(hi, lo), false)).toBe(true);
      expect([keys.kind, keys.hi >>> 0, keys.lo >>> 0]).toEqual([KIND_INT, hi, lo]);
      // Kept signed (int32) so that they never box: the same bits.
      expect([keys.hi, keys.lo]).toEqual([hi | 0, lo | 0]);
    }
  });

  it("does not take other 16-char strings for integers", () => {
    const keys = new EngineHashKeys();
    const others = [
      "0123456789abcdeF", // uppercase: not the normalised form
      "0123456789abcdeg",
      "s:0123456789abcd", // a Mooncake string id of 14 chars
      // Non-ASCII chars whose low 7 bits are hex digits ('0' = 0x30, 'a' = 0x61).
      `0123456789abcde${String.fromCharCode(0xb0)}`,
      `${String.fromCharCode(0xe1)}123456789abcdef`,
      `0123456${String.fromCharCode(0x130)}89abcdef`,
    ];
    for (const s of others) {
      expect(s).toHaveLength(16);
      expect(keys.parse(h(s), false)).toBe(false);
      expect(keys.parse(h(s), true)).toBe(true);
      expect(keys.kind).toBe(KIND_INTERNED);
    }
    expect(keys.internedCount).toBe(others.length);
  });

  it("interns non-integer hashes and frees their ids when released", () => {
    const keys = new EngineHashKeys();
    const a = engineHashFromString("mc-1");
    expect(keys.parse(a, false)).toBe(false);
    expect(keys.parse(a, true)).toBe(true);
    const id = keys.lo;
    keys.retain(id);
    expect(keys.parse(a, false)).toBe(true);
    expect(keys.lo).toBe(id);
    keys.release(id);
    expect(keys.internedCount).toBe(0);
    expect(keys.parse(a, false)).toBe(false);
  });
});
