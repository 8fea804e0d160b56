import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { jsonDepthExceeds } from "./json-depth.js";

/** The plainest reading of the rule: every byte in turn, a backslash in a string skips one. */
function reference(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
      continue;
    }
    if (c === '"') inString = true;
    else if (c === "[" || c === "{") {
      if (++depth > max) return true;
    } else if (c === "]" || c === "}") depth--;
  }
  return false;
}

const bytes = (s: string) => Buffer.from(s, "utf8");

describe("jsonDepthExceeds", () => {
  it("counts nesting outside strings only, escapes included", () => {
    expect(jsonDepthExceeds(bytes("[[1]]"), 2)).toBe(false);
    expect(jsonDepthExceeds(bytes("[[[1]]]"), 2)).toBe(true);
    expect(jsonDepthExceeds(bytes('["[[[[", {"a": "{{{"}]'), 2)).toBe(false);
    // An escaped quote does not end the string; an escaped backslash before one does.
    expect(jsonDepthExceeds(bytes('["\\"[[[["]'), 1)).toBe(false);
    expect(jsonDepthExceeds(bytes('["\\\\", [[1]]]'), 2)).toBe(true);
    expect(jsonDepthExceeds(bytes('["\\\\\\"[[", 1]'), 1)).toBe(false);
    // Multi-byte characters (no byte of them is ASCII) change nothing.
    expect(jsonDepthExceeds(bytes('{"é": ["日本", ["🙂"]]}'), 2)).toBe(true);
    expect(jsonDepthExceeds(bytes('{"é": ["日本[[[", "🙂"]}'), 2)).toBe(false);
  });

  it("agrees with the byte-by-byte reading on any text of brackets, quotes and escapes", () => {
    const text = fc
      .array(fc.constantFrom("[", "]", "{", "}", '"', "\\", "a", ",", " ", "é"), { maxLength: 80 })
      .map((cs) => cs.join(""));
    fc.assert(
      fc.property(text, fc.integer({ min: 0, max: 6 }), (t, max) => {
        expect(jsonDepthExceeds(bytes(t), max)).toBe(reference(t, max));
      }),
      { numRuns: 20_000, seed: 7 },
    );
  });
});
