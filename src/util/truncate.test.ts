import { describe, expect, it } from "vitest";
import { clip, echoValue, preview } from "./truncate.js";

describe("bounded echoes", () => {
  it("clips long text and keeps short text", () => {
    expect(clip("abc")).toBe("abc");
    expect(clip("x".repeat(100))).toBe(`${"x".repeat(77)}...`);
    expect(clip("abcdef", 5)).toBe("ab...");
  });

  it("previews values as JSON, cut at the limit", () => {
    expect(preview({ a: [1, 2], b: "x" })).toBe('{"a":[1,2],"b":"x"}');
    expect(preview(Array.from({ length: 1000 }, (_, i) => i)).length).toBe(80);
  });

  it("never walks a whole hostile value: deep nesting and huge strings", () => {
    let deep: unknown = 1;
    for (let i = 0; i < 200_000; i++) deep = [deep];
    // JSON.stringify(deep) overflows the stack; preview stops at its depth bound.
    expect(() => JSON.stringify(deep)).toThrow(RangeError);
    expect(preview(deep)).toBe("[[[[[[[[[...]]]]]]]]]");
    const huge = "y".repeat(4 * 1024 * 1024);
    expect(echoValue(huge)).toBe(`${"y".repeat(77)}...`);
    expect((echoValue({ s: huge }) as string).length).toBeLessThanOrEqual(80);
    expect(echoValue(5)).toBe(5);
    expect(echoValue(null)).toBe(null);
  });
});
