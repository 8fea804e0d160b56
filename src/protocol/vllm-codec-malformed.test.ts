import { encode } from "@msgpack/msgpack";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { DECODE_ERROR_CODES, type DecodeErrorCode } from "./decode-error.js";
import { encodeEventBatch, type WireBatch } from "./event-encoder.js";
import { decodeEventBatch } from "./vllm-codec.js";

const hex = (s: string) => new Uint8Array(Buffer.from(s, "hex"));

function expectError(payload: Uint8Array, code: DecodeErrorCode, mentions?: string[]) {
  const r = decodeEventBatch(payload);
  if (r.ok) throw new Error(`expected ${code}, decoded ${JSON.stringify(r.batch)}`);
  expect(r.error.code, r.error.message).toBe(code);
  for (const m of mentions ?? []) expect(r.error.message).toContain(m);
  return r.error;
}

const VALID: WireBatch = {
  ts: 1789095808.5,
  dpRank: 1,
  events: [
    {
      type: "BlockStored",
      blockHashes: [1n << 63n, 7n, -3n],
      parentHash: 99n,
      tokenIds: Array.from({ length: 48 }, (_, i) => i * 3001),
      blockSize: 16,
      loraId: null,
      medium: "GPU",
      loraName: null,
      groupIdx: 0,
      kvCacheSpecKind: "full_attention",
    },
    { type: "BlockRemoved", blockHashes: [7n], medium: "CPU" },
    { type: "AllBlocksCleared" },
  ],
};

describe("decodeEventBatch: malformed payloads give a typed error", () => {
  it("not msgpack: empty, truncated, reserved byte, trailing bytes, too deep, bad UTF-8", () => {
    expectError(new Uint8Array(0), "not_msgpack", ["truncated"]);
    const full = encodeEventBatch(VALID);
    for (const cut of [1, 5, 20, full.length - 1])
      expectError(full.subarray(0, cut), "not_msgpack");
    expectError(hex("c1"), "not_msgpack");
    expectError(
      new Uint8Array([...encodeEventBatch({ ts: 1, events: [], dpRank: 0 }), 0]),
      "not_msgpack",
      ["trailing"],
    );
    const deep = new Uint8Array([
      0x92,
      0x01,
      0x91,
      0x92,
      0xa3,
      0x58,
      0x59,
      0x5a,
      ...Array(200).fill(0x91),
      0x00,
    ]);
    expectError(deep, "not_msgpack", ["deep"]);
    expectError(
      encode([1, [["BlockRemoved", [1], "GPU"]]]).map((b, i, a) => (i === a.length - 2 ? 0xff : b)),
      "not_msgpack",
      ["UTF-8"],
    );
    // An array header claiming far more items than there are bytes.
    expectError(hex("92cb3ff0000000000000dd7fffffff"), "not_msgpack");
  });

  it("bad envelope", () => {
    expectError(encode("hello"), "bad_envelope");
    expectError(encode([1]), "bad_envelope");
    expectError(encode(["now", []]), "bad_envelope", ["ts"]);
    expectError(encode([1, {}]), "bad_envelope", ["events"]);
    expectError(encode([1, [], -1]), "bad_envelope", ["data_parallel_rank"]);
    expectError(encode([1, [], "0"]), "bad_envelope");
    expectError(encode({ events: [] }), "bad_envelope", ["ts"]);
    expectError(encode({ ts: 1 }), "bad_envelope", ["events"]);
    expectError(hex("92cb7ff800000000000090"), "bad_envelope", ["ts"]); // NaN
  });

  it("bad event, naming the event index and field", () => {
    const one = (e: unknown) => encode([1, [["AllBlocksCleared"], e]]);
    const err = expectError(one(["BlockStored", [1], null, "tokens", 16]), "bad_tokens", [
      "event 1",
      "token_ids",
    ]);
    expect(err).toMatchObject({ eventIndex: 1, field: "token_ids" });
    expectError(one(42), "bad_event", ["event 1"]);
    expectError(one([]), "bad_event");
    expectError(one([7, [1]]), "bad_event", ["tag"]);
    expectError(one(["BlockStored", [1], null, [1]]), "bad_event", ["fields"]);
    expectError(one(["BlockRemoved"]), "bad_event");
    expectError(one(["BlockStored", [1], null, [1], -1]), "bad_event", ["block_size"]);
    expectError(one(["BlockStored", [1], null, [1], 1.5]), "bad_event", ["block_size"]);
    expectError(one(["BlockStored", [1], null, [1], 1, "x"]), "bad_event", ["lora_id"]);
    expectError(one(["BlockStored", [1], null, [1], 1, null, 5]), "bad_event", ["medium"]);
    expectError(one(["BlockStored", [1], null, [1], 1, null, "GPU", 3]), "bad_event", [
      "lora_name",
    ]);
    expectError(one(["BlockRemoved", [1], "GPU", "one"]), "bad_event", ["group_idx"]);
    expectError(one(["BlockRemoved", 1, "GPU"]), "bad_event", ["block_hashes"]);
    expectError(one({ medium: "GPU", block_hashes: [1] }), "bad_event", ["type"]);
    expectError(one({ type: 5 }), "bad_event", ["type"]);
    expectError(one({ type: "BlockStored", block_hashes: [1], block_size: 1 }), "bad_event", [
      "required",
    ]);
    expectError(one({ type: "BlockRemoved", 3: "x" }), "bad_event");
  });

  it("bad hashes and token ids", () => {
    const one = (e: unknown) => encode([1, [e]]);
    expectError(one(["BlockRemoved", [1, 2.5], "GPU"]), "bad_hash", ["block_hashes[1]", "float"]);
    expectError(one(["BlockRemoved", [true], "GPU"]), "bad_hash");
    expectError(one(["BlockRemoved", [""], "GPU"]), "bad_hash");
    expectError(one(["BlockRemoved", [[1]], "GPU"]), "bad_hash");
    expectError(one(["BlockRemoved", [new Uint8Array(0)], "GPU"]), "bad_hash");
    expectError(one(["BlockRemoved", [new Uint8Array(65)], "GPU"]), "bad_hash");
    expectError(one(["BlockStored", [1], 1.5, [1], 1]), "bad_hash", ["parent_block_hash"]);
    expectError(one(["BlockStored", [1], null, [1, -2], 1]), "bad_tokens", ["token_ids[1]"]);
    expectError(one(["BlockStored", [1], null, [2 ** 32], 1]), "bad_tokens");
    expectError(one(["BlockStored", [1], null, [1.5], 1]), "bad_tokens");
    expectError(one(["BlockStored", [1], null, ["1"], 1]), "bad_tokens");
  });
});

describe("decodeEventBatch never throws (fast-check)", () => {
  const valid = [
    encodeEventBatch(VALID),
    encodeEventBatch(VALID, { eventForm: "array", hashForm: "int64" }),
    encodeEventBatch(VALID, { envelopeForm: "map", hashForm: "binary", engine: "sglang" }),
  ];

  const checkResult = (payload: Uint8Array) => {
    const r = decodeEventBatch(payload);
    if (!r.ok) {
      expect(DECODE_ERROR_CODES).toContain(r.error.code);
      expect(r.error.message.length).toBeGreaterThan(0);
    }
  };

  it("on random bytes", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (b) => checkResult(b)),
      { numRuns: 2000 },
    );
  });

  it("on valid payloads with bytes flipped, cut, or inserted", () => {
    const mutation = fc.record({
      which: fc.integer({ min: 0, max: valid.length - 1 }),
      edits: fc.array(
        fc.tuple(
          fc.nat(),
          fc.integer({ min: 0, max: 255 }),
          fc.constantFrom("set", "cut", "insert"),
        ),
        {
          minLength: 1,
          maxLength: 4,
        },
      ),
    });
    fc.assert(
      fc.property(mutation, ({ which, edits }) => {
        let b = Array.from(valid[which]!);
        for (const [at, value, op] of edits) {
          const i = at % (b.length + 1);
          if (op === "set" && i < b.length) b[i] = value;
          else if (op === "cut") b = b.slice(0, i);
          else b.splice(i, 0, value);
        }
        checkResult(new Uint8Array(b));
      }),
      { numRuns: 3000 },
    );
  });

  it("on arbitrary msgpack values", () => {
    fc.assert(
      fc.property(fc.anything({ maxDepth: 4 }), (v) => {
        let bytes: Uint8Array;
        try {
          bytes = encode(v);
        } catch {
          return;
        }
        checkResult(bytes);
      }),
      { numRuns: 1000 },
    );
  });
});
