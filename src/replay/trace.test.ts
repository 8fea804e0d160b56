import { describe, expect, it } from "vitest";
import { parseTrace, parseTraceLine, TraceFormatError } from "./trace.js";

const line = (o: Record<string, unknown>) => JSON.stringify(o);
const ok = { timestamp: 5, input_length: 600, output_length: 7, hash_ids: [0, 1] };

describe("parseTraceLine", () => {
  it("reads the four fields", () => {
    expect(parseTraceLine(line(ok), 1)).toEqual({
      arrivalMs: 5,
      inputLength: 600,
      outputLength: 7,
      hashIds: [0, 1],
    });
  });

  it.each([
    ["not json", "{", /line 3: not JSON/],
    ["array", "[1]", /line 3: expected a JSON object/],
    ["negative timestamp", line({ ...ok, timestamp: -1 }), /'timestamp'/],
    ["fractional length", line({ ...ok, input_length: 1.5 }), /'input_length'/],
    [
      "zero length",
      line({ ...ok, input_length: 0, hash_ids: [] }),
      /'input_length' must be at least 1/,
    ],
    ["missing output", line({ ...ok, output_length: undefined }), /'output_length'/],
    ["bad id", line({ ...ok, hash_ids: [0, "x"] }), /'hash_ids' holds "x"/],
    ["wrong block count", line({ ...ok, hash_ids: [0] }), /has 1 ids but input_length 600 needs 2/],
  ])("rejects %s with the line and field", (_name, text, msg) => {
    expect(() => parseTraceLine(text, 3)).toThrow(TraceFormatError);
    expect(() => parseTraceLine(text, 3)).toThrow(msg);
  });
});

describe("parseTrace", () => {
  it("skips blank lines, sorts by arrival keeping file order for ties, numbers requests", () => {
    const text = [
      line({ ...ok, timestamp: 9, hash_ids: [0, 10] }),
      "",
      line({ ...ok, timestamp: 3, hash_ids: [0, 20] }),
      line({ ...ok, timestamp: 9, hash_ids: [0, 30] }),
    ].join("\n");
    const reqs = parseTrace(text);
    expect(reqs.map((r) => [r.index, r.arrivalMs, r.hashIds[1]])).toEqual([
      [0, 3, 20],
      [1, 9, 10],
      [2, 9, 30],
    ]);
  });

  it("keeps only the first `limit` requests of the file", () => {
    const text = [1, 2, 3].map((t) => line({ ...ok, timestamp: t })).join("\n");
    expect(parseTrace(text, { limit: 2 }).map((r) => r.arrivalMs)).toEqual([1, 2]);
  });

  it("names the line of a bad request in a longer file", () => {
    const text = [line(ok), "", line({ ...ok, hash_ids: [] })].join("\n");
    expect(() => parseTrace(text)).toThrow(/trace line 3:/);
  });
});
