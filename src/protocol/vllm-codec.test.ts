import { encode } from "@msgpack/msgpack";
import { describe, expect, it } from "vitest";
import { VECTOR_REMOVED_HASH, VECTOR_TS, VECTORS } from "../../test/fixtures/wire-vectors.js";
import { engineHashFromBigInt, engineHashFromBytes, engineHashFromString } from "./engine-hash.js";
import {
  digestOf,
  type EncodeOptions,
  encodeEventBatch,
  type WireBatch,
  type WireBlockStored,
  type WireEvent,
  type WireHash,
} from "./event-encoder.js";
import type { KvEvent } from "./events.js";
import { type DecodeResult, decodeEventBatch } from "./vllm-codec.js";

const hex = (s: string) => new Uint8Array(Buffer.from(s.replace(/\s+/g, ""), "hex"));
const TS = VECTOR_TS;
const REMOVED_HASH = VECTOR_REMOVED_HASH;

function ok(r: DecodeResult) {
  if (!r.ok) throw new Error(`decode failed: ${r.error.code}: ${r.error.message}`);
  return r;
}

/** What the decoder must produce for a wire event, computed with the engine-hash helpers. */
function expectedHash(h: WireHash, o: Partial<EncodeOptions>) {
  if (o.hashForm === "binary") {
    return engineHashFromBytes(typeof h === "bigint" ? digestOf(h, o.digestBytes ?? 32) : h);
  }
  if (typeof h !== "bigint") throw new Error("test feeds bigint hashes to int forms");
  return engineHashFromBigInt(BigInt.asUintN(64, h));
}

function expected(e: WireEvent, o: Partial<EncodeOptions>): KvEvent | null {
  const tierOf = (m: string | null) =>
    m === null || m === "GPU" ? "gpu" : m === "CPU" ? "host" : "disk";
  switch (e.type) {
    case "BlockStored":
      if (
        (e.groupIdx ?? 0) > 0 ||
        !["full_attention", undefined, null].includes(e.kvCacheSpecKind)
      ) {
        return null;
      }
      return {
        type: "stored",
        blockHashes: e.blockHashes.map((h) => expectedHash(h, o)),
        parentHash: e.parentHash === null ? null : expectedHash(e.parentHash, o),
        tokenIds: Uint32Array.from(e.tokenIds),
        blockSize: e.blockSize,
        loraId: e.loraId,
        loraName: o.engine === "sglang" ? null : e.loraName,
        medium: e.medium,
        tier: tierOf(e.medium),
      };
    case "BlockRemoved":
      if ((e.groupIdx ?? 0) > 0) return null;
      return {
        type: "removed",
        blockHashes: e.blockHashes.map((h) => expectedHash(h, o)),
        medium: e.medium,
        tier: tierOf(e.medium),
      };
    case "AllBlocksCleared":
      return { type: "cleared" };
    case "custom":
      return null;
  }
}

/** Hashes spanning every msgpack int width, both signs, and values ≥ 2^63. */
const HASHES: bigint[] = [
  0n,
  1n,
  127n,
  128n,
  255n,
  256n,
  65535n,
  65536n,
  0xffff_ffffn,
  0x1_0000_0000n,
  (1n << 53n) + 1n,
  (1n << 63n) - 1n,
  1n << 63n,
  REMOVED_HASH,
  (1n << 64n) - 1n,
  -1n,
  -32n,
  -33n,
  -128n,
  -129n,
  -32768n,
  -32769n,
  -(1n << 31n),
  -(1n << 31n) - 1n,
  -(1n << 63n),
];

const stored = (over: Partial<WireBlockStored> = {}): WireBlockStored => ({
  type: "BlockStored",
  blockHashes: [HASHES[13]!, HASHES[3]!],
  parentHash: HASHES[15]!,
  tokenIds: Array.from(
    { length: 32 },
    (_, i) => [0, 127, 128, 255, 256, 65535, 65536, 151_000][i % 8]!,
  ),
  blockSize: 16,
  loraId: null,
  medium: "GPU",
  loraName: null,
  ...over,
});

const SAMPLE_EVENTS: WireEvent[] = [
  stored(),
  stored({ parentHash: null, loraId: 3, loraName: "adapter-a", medium: "CPU" }),
  stored({ blockHashes: HASHES, tokenIds: [], blockSize: 0, medium: "DISK" }),
  stored({ groupIdx: 0, kvCacheSpecKind: "full_attention", kvCacheSpecSlidingWindow: null }),
  { type: "BlockRemoved", blockHashes: [REMOVED_HASH], medium: "GPU" },
  { type: "BlockRemoved", blockHashes: HASHES, medium: null },
  { type: "AllBlocksCleared" },
];

describe("decodeEventBatch: docs/wire-formats.md §7 vectors", () => {
  it("decodes the BlockRemoved vectors (map and array event) to the ≥ 2^63 hash", () => {
    for (const payload of [VECTORS.removedMap, VECTORS.removedArray]) {
      const r = ok(decodeEventBatch(payload));
      expect(r.batch).toEqual({
        ts: TS,
        dpRank: 0,
        events: [
          {
            type: "removed",
            blockHashes: [engineHashFromBigInt(REMOVED_HASH)],
            medium: "GPU",
            tier: "gpu",
          },
        ],
      });
      expect(r.batch.events[0]).toMatchObject({ blockHashes: ["dab89baa7b5857c0"] });
      expect(r.skipped).toEqual({ unknownTag: 0, nonMainGroup: 0, unknownKeys: 0 });
    }
    expect(VECTORS.removedMap.length).toBe(76);
  });

  it("decodes the AllBlocksCleared vectors", () => {
    for (const payload of [VECTORS.clearedMap, VECTORS.clearedArray]) {
      expect(ok(decodeEventBatch(payload)).batch).toEqual({
        ts: TS,
        dpRank: 0,
        events: [{ type: "cleared" }],
      });
    }
  });
});

describe("decodeEventBatch: every encoder variant round-trips", () => {
  const forms = ["array", "map"] as const;
  const hashForms = ["uint64", "int64", "binary"] as const;
  const engines = ["vllm", "sglang"] as const;
  for (const eventForm of forms)
    for (const envelopeForm of forms)
      for (const hashForm of hashForms)
        for (const engine of engines)
          for (const dp of [
            { includeDpRank: true, dpRank: 3 },
            { includeDpRank: true, dpRank: null },
            { includeDpRank: false, dpRank: 5 },
          ]) {
            const o = {
              eventForm,
              envelopeForm,
              hashForm,
              engine,
              includeDpRank: dp.includeDpRank,
            };
            it(`${eventForm} events, ${envelopeForm} envelope, ${hashForm}, ${engine}, dp ${dp.includeDpRank ? dp.dpRank : "absent"}`, () => {
              const events =
                engine === "sglang"
                  ? SAMPLE_EVENTS.map((e) =>
                      e.type === "BlockStored"
                        ? { ...e, loraName: null, groupIdx: null, kvCacheSpecKind: null }
                        : e,
                    )
                  : SAMPLE_EVENTS;
              const batch: WireBatch = { ts: TS, events, dpRank: dp.dpRank };
              const r = ok(decodeEventBatch(encodeEventBatch(batch, o), { fieldOrder: engine }));
              expect(r.batch.ts).toBe(TS);
              expect(r.batch.dpRank).toBe(dp.includeDpRank ? dp.dpRank : null);
              expect(r.batch.events).toEqual(
                events.map((e) => expected(e, o)).filter((e) => e !== null),
              );
              expect(r.skipped).toEqual({ unknownTag: 0, nonMainGroup: 0, unknownKeys: 0 });
              // Auto-detection gets these right too (no lone strings in field 7 here).
              expect(decodeEventBatch(encodeEventBatch(batch, o))).toEqual(r);
            });
          }

  it("binary digests of 16 and 32 bytes, given or derived", () => {
    const given = Uint8Array.from({ length: 16 }, (_, i) => i * 17);
    const batch: WireBatch = {
      ts: TS,
      dpRank: 0,
      events: [stored({ blockHashes: [given, 42n], parentHash: digestOf(7n, 32) })],
    };
    for (const digestBytes of [16, 32] as const) {
      const r = ok(decodeEventBatch(encodeEventBatch(batch, { hashForm: "binary", digestBytes })));
      const e = r.batch.events[0]!;
      expect(e.type === "stored" && e.blockHashes).toEqual([
        engineHashFromBytes(given),
        engineHashFromBytes(digestOf(42n, digestBytes)),
      ]);
      expect(e.type === "stored" && e.parentHash).toBe(engineHashFromBytes(digestOf(7n, 32)));
    }
  });

  it("int64 and uint64 forms of the same bits give the same engine hash", () => {
    const batch: WireBatch = {
      ts: TS,
      dpRank: 0,
      events: [{ type: "BlockRemoved", blockHashes: HASHES, medium: "GPU" }],
    };
    const a = ok(decodeEventBatch(encodeEventBatch(batch, { hashForm: "uint64" })));
    const b = ok(decodeEventBatch(encodeEventBatch(batch, { hashForm: "int64" })));
    expect(a.batch.events).toEqual(b.batch.events);
    const e = a.batch.events[0]!;
    expect(e.type === "removed" && e.blockHashes[15]).toBe("ffffffffffffffff");
    expect(e.type === "removed" && e.blockHashes[14]).toBe("ffffffffffffffff");
  });
});

describe("decodeEventBatch: shapes other writers produce", () => {
  const gpu = { medium: "GPU", tier: "gpu" };

  it("accepts a map envelope with or without the rank, and SGLang's attn_dp_rank", () => {
    const events = [["BlockRemoved", [5], "GPU"]];
    const r1 = ok(decodeEventBatch(encode({ events, ts: 12.5 })));
    expect(r1.batch).toEqual({
      ts: 12.5,
      dpRank: null,
      events: [{ type: "removed", blockHashes: [engineHashFromBigInt(5n)], ...gpu }],
    });
    const r2 = ok(decodeEventBatch(encode({ ts: 1, events, attn_dp_rank: 2 })));
    expect(r2.batch.dpRank).toBe(2);
    const r3 = ok(decodeEventBatch(encode({ ts: 1, events, data_parallel_rank: null })));
    expect(r3.batch.dpRank).toBeNull();
  });

  it("accepts an integer ts (seconds) and a float32 ts", () => {
    expect(ok(decodeEventBatch(encode([1789095808, []]))).batch.ts).toBe(1789095808);
    const f32 = hex("92ca3fc0000090");
    expect(ok(decodeEventBatch(f32)).batch.ts).toBe(1.5);
  });

  it("finds the tag of a map event wherever it is", () => {
    const r = ok(
      decodeEventBatch(encode([1, [{ medium: "CPU", block_hashes: [-1], type: "BlockRemoved" }]])),
    );
    expect(r.batch.events).toEqual([
      { type: "removed", blockHashes: ["ffffffffffffffff"], medium: "CPU", tier: "host" },
    ]);
  });

  it("accepts truncated arrays: old vLLM (no medium) and old SGLang stored/removed", () => {
    const r = ok(
      decodeEventBatch(
        encode([
          1,
          [
            ["BlockStored", [1, 2], null, [1, 2, 3, 4], 2, null],
            ["BlockStored", [3], 2, [5, 6], 2],
            ["BlockRemoved", [1]],
          ],
        ]),
      ),
    );
    expect(r.batch.events).toEqual([
      {
        type: "stored",
        blockHashes: ["0000000000000001", "0000000000000002"],
        parentHash: null,
        tokenIds: Uint32Array.of(1, 2, 3, 4),
        blockSize: 2,
        loraId: null,
        loraName: null,
        medium: null,
        tier: "gpu",
      },
      {
        type: "stored",
        blockHashes: ["0000000000000003"],
        parentHash: "0000000000000002",
        tokenIds: Uint32Array.of(5, 6),
        blockSize: 2,
        loraId: null,
        loraName: null,
        medium: null,
        tier: "gpu",
      },
      { type: "removed", blockHashes: ["0000000000000001"], medium: null, tier: "gpu" },
    ]);
  });

  it("accepts string hashes (normalised as strings)", () => {
    const r = ok(decodeEventBatch(encode([1, [["BlockRemoved", ["0xabc", "123"], "GPU"]]])));
    expect(r.batch.events[0]).toMatchObject({
      blockHashes: [engineHashFromString("0xabc"), engineHashFromString("123")],
    });
  });

  it("tells SGLang's 8-field BlockStored from vLLM's in auto mode", () => {
    const sglang = ["BlockStored", [1], null, [1, 2], 2, 7, "CPU", "salt", "session-1"];
    const vllm = ["BlockStored", [1], null, [1, 2], 2, 7, "CPU", "lora-x", [["mm"]]];
    const s = ok(decodeEventBatch(encode([1, [sglang]]))).batch.events[0];
    const v = ok(decodeEventBatch(encode([1, [vllm]]))).batch.events[0];
    expect(s).toMatchObject({ loraName: null, loraId: 7, medium: "CPU", tier: "host" });
    expect(v).toMatchObject({ loraName: "lora-x", loraId: 7, medium: "CPU" });
    // Seven fields are ambiguous: auto reads a LoRA name, an explicit order a salt.
    const seven = ["BlockStored", [1], null, [1, 2], 2, null, "GPU", "salt"];
    expect(ok(decodeEventBatch(encode([1, [seven]]))).batch.events[0]).toMatchObject({
      loraName: "salt",
    });
    expect(
      ok(decodeEventBatch(encode([1, [seven]]), { fieldOrder: "sglang" })).batch.events[0],
    ).toMatchObject({ loraName: null });
  });
});

describe("decodeEventBatch: skipped on purpose, and counted", () => {
  it("drops non-main KV cache groups by group_idx or spec kind", () => {
    const batch: WireBatch = {
      ts: 1,
      dpRank: 0,
      events: [
        stored({ groupIdx: 1, kvCacheSpecKind: "full_attention" }),
        stored({ groupIdx: 0, kvCacheSpecKind: "sliding_window", kvCacheSpecSlidingWindow: 4096 }),
        stored({ kvCacheSpecKind: "mamba" }),
        stored({ kvCacheSpecKind: "mla_attention" }),
        stored({ kvCacheSpecKind: "sink_full_attention" }),
        { type: "BlockRemoved", blockHashes: [1n], medium: "GPU", groupIdx: 2 },
        { type: "BlockRemoved", blockHashes: [1n], medium: "GPU", groupIdx: 0 },
      ],
    };
    for (const eventForm of ["array", "map"] as const) {
      const r = ok(decodeEventBatch(encodeEventBatch(batch, { eventForm })));
      expect(r.batch.events.map((e) => e.type)).toEqual(["stored", "stored", "removed"]);
      expect(r.skipped).toEqual({ unknownTag: 0, nonMainGroup: 4, unknownKeys: 0 });
    }
  });

  it("skips unknown tags and ignores unknown keys and trailing fields", () => {
    const batch: WireBatch = {
      ts: 1,
      dpRank: 0,
      events: [
        {
          type: "custom",
          tag: "BlockInactive",
          fields: [
            ["block_hashes", [1n, 2n]],
            ["why", { nested: [1, [2, [3]]] }],
          ],
        },
        stored({
          extraFields: [
            ["future_field", "x"],
            ["another", [1, 2.5, null, true]],
          ],
        }),
        {
          type: "BlockRemoved",
          blockHashes: [9n],
          medium: "GPU",
          extraFields: [["token_ids", [1]]],
        },
        { type: "AllBlocksCleared", extraFields: [["medium", "GPU"]] },
      ],
    };
    for (const eventForm of ["array", "map"] as const) {
      const r = ok(decodeEventBatch(encodeEventBatch(batch, { eventForm })));
      expect(r.batch.events.map((e) => e.type)).toEqual(["stored", "removed", "cleared"]);
      expect(r.skipped).toEqual({ unknownTag: 1, nonMainGroup: 0, unknownKeys: 4 });
    }
    const odd = ok(
      decodeEventBatch(
        encode([
          1,
          [
            {
              type: "BlockRemoved",
              block_hashes: [1],
              ["k".repeat(300)]: 1,
              médium: "x",
              medium: "GPU",
            },
            { type: "X".repeat(40) },
          ],
        ]),
      ),
    );
    expect(odd.batch.events).toHaveLength(1);
    expect(odd.skipped).toEqual({ unknownTag: 1, nonMainGroup: 0, unknownKeys: 2 });
    const env = ok(decodeEventBatch(encode({ ts: 1, events: [], schema: 2 })));
    expect(env.skipped.unknownKeys).toBe(1);
    expect(ok(decodeEventBatch(encode([1, [], 0, "later"]))).skipped.unknownKeys).toBe(1);
  });
});
