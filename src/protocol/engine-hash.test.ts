import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  engineHashFromBigInt,
  engineHashFromBytes,
  engineHashFromSafeInt,
  engineHashFromString,
  engineHashFromU32Pair,
} from "./engine-hash.js";

describe("engine hash normalisation", () => {
  it("gives the 64-bit halves the same string as the bigint of the same bits", () => {
    const half = fc.oneof(
      fc.integer({ min: -(2 ** 31), max: 2 ** 32 - 1 }),
      fc.constantFrom(0, 1, 0xffff_ffff, -1, 0x8000_0000),
    );
    fc.assert(
      fc.property(half, half, (hi, lo) => {
        const value = (BigInt(hi >>> 0) << 32n) | BigInt(lo >>> 0);
        expect(engineHashFromU32Pair(hi, lo)).toBe(engineHashFromBigInt(value));
      }),
      { numRuns: 5000 },
    );
  });

  it("treats signed and unsigned forms of the same 64 bits as one hash", () => {
    expect(engineHashFromU32Pair(0xdab89baa, 0x7b5857c0)).toBe(
      engineHashFromBigInt(15760518052499183552n),
    );
    expect(engineHashFromBigInt(-1n)).toBe(engineHashFromBigInt(2n ** 64n - 1n));
    expect(engineHashFromSafeInt(-1)).toBe("ffffffffffffffff");
    expect(engineHashFromSafeInt(5)).toBe("0000000000000005");
    expect(engineHashFromSafeInt(2 ** 40 + 3)).toBe(engineHashFromBigInt(2n ** 40n + 3n));
  });

  it("rejects values that do not fit 64 bits", () => {
    expect(() => engineHashFromBigInt(2n ** 64n)).toThrow(RangeError);
    expect(() => engineHashFromBigInt(-(2n ** 63n) - 1n)).toThrow(RangeError);
    expect(() => engineHashFromSafeInt(2 ** 60)).toThrow(RangeError);
  });

  it("keeps binary and string forms apart from integers and from each other", () => {
    expect(engineHashFromBytes(new Uint8Array([0xab, 0x01]))).toBe("b:ab01");
    expect(engineHashFromString("ab01")).toBe("s:ab01");
    expect(engineHashFromString("0000000000000005")).not.toBe(engineHashFromSafeInt(5));
  });
});
