import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { engineHashFromBigInt, engineHashFromU32Pair } from "./engine-hash.js";
import { hashFromU32Pair } from "./hash-hex.js";

describe("hashFromU32Pair", () => {
  it("equals engineHashFromU32Pair for any halves, signed or not", () => {
    const half = fc.oneof(
      fc.integer({ min: -(2 ** 31), max: 2 ** 32 - 1 }),
      fc.constantFrom(0, 1, 0xffff_ffff, -1, 0x8000_0000),
    );
    fc.assert(
      fc.property(half, half, (hi, lo) => {
        expect(hashFromU32Pair(hi, lo)).toBe(engineHashFromU32Pair(hi, lo));
      }),
      { numRuns: 5000 },
    );
  });

  it("matches the bigint form of the same value", () => {
    expect(hashFromU32Pair(0xdab89baa, 0x7b5857c0)).toBe(
      engineHashFromBigInt(15760518052499183552n),
    );
    expect(hashFromU32Pair(0, 5)).toBe("0000000000000005");
  });
});
