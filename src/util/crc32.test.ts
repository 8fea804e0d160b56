import { describe, expect, it } from "vitest";
import { crc32 } from "./crc32.js";

describe("crc32", () => {
  it("matches the standard check value and continues across pieces", () => {
    const bytes = new TextEncoder().encode("123456789");
    expect(crc32(bytes)).toBe(0xcbf43926);
    expect(crc32(bytes.subarray(4), crc32(bytes.subarray(0, 4)))).toBe(0xcbf43926);
    expect(crc32(new Uint8Array(0))).toBe(0);
  });
});
