import { describe, expect, it } from "vitest";
import { parseReplyFrames } from "./replay-client.js";
import { decodeSeq, END_SEQ_FRAME, encodeSeq, isEndSeq } from "./seq.js";

const empty = new Uint8Array(0);
const payload = new Uint8Array([0x93, 1, 2]);

describe("parseReplyFrames", () => {
  it("reads the new layout (topic, seq, payload) and its end marker", () => {
    const batch = parseReplyFrames([empty, Buffer.from("kv-events"), encodeSeq(42n), payload]);
    expect(batch).toEqual({ kind: "batch", seq: 42n, payload });
    expect(parseReplyFrames([empty, empty, END_SEQ_FRAME, empty])).toEqual({ kind: "end" });
  });

  it("reads the old layout (seq, payload) and its end marker", () => {
    expect(parseReplyFrames([empty, encodeSeq(7n), payload])).toEqual({
      kind: "batch",
      seq: 7n,
      payload,
    });
    expect(parseReplyFrames([empty, END_SEQ_FRAME, empty])).toEqual({ kind: "end" });
  });

  it("reads Mooncake dev's end marker (empty seq frame, payload FF×8)", () => {
    expect(parseReplyFrames([empty, empty, END_SEQ_FRAME])).toEqual({ kind: "end" });
  });

  it("keeps seqs above 2^63 exact", () => {
    const big = (1n << 63n) + 5n;
    expect(parseReplyFrames([empty, encodeSeq(big), payload])).toMatchObject({ seq: big });
  });

  it("rejects unknown layouts and bad seq frames", () => {
    expect(parseReplyFrames([])).toMatchObject({ kind: "malformed" });
    expect(parseReplyFrames([payload, encodeSeq(1n), payload])).toMatchObject({
      kind: "malformed",
    });
    expect(parseReplyFrames([empty, new Uint8Array(4), payload])).toMatchObject({
      kind: "malformed",
    });
    expect(parseReplyFrames([empty, payload])).toMatchObject({ kind: "malformed" });
    expect(parseReplyFrames([empty, empty, encodeSeq(1n), payload, payload])).toMatchObject({
      kind: "malformed",
    });
  });
});

describe("seq frames", () => {
  it("round-trips 64-bit unsigned values big-endian", () => {
    expect([...encodeSeq(1n)]).toEqual([0, 0, 0, 0, 0, 0, 0, 1]);
    expect(decodeSeq(encodeSeq(2n ** 64n - 2n))).toBe(2n ** 64n - 2n);
    expect(decodeSeq(new Uint8Array(7))).toBeNull();
    expect(isEndSeq(END_SEQ_FRAME)).toBe(true);
    expect(isEndSeq(encodeSeq(2n ** 64n - 2n))).toBe(false);
  });
});
