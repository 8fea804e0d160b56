import { decode } from "@msgpack/msgpack";
import { describe, expect, it } from "vitest";
import { VECTORS } from "../../test/fixtures/wire-vectors.js";
import { digestOf, encodeEventBatch, type WireBlockStored } from "./event-encoder.js";
import { MsgpackWriter } from "./msgpack-writer.js";

const TS = 1789095808.8378847;
const H = 15760518052499183552n;
const hexOf = (b: Uint8Array) => Buffer.from(b).toString("hex");
/** An independent reading of our bytes, with a general-purpose msgpack library. */
const generic = (b: Uint8Array) => decode(b, { useBigInt64: true });

const stored = (over: Partial<WireBlockStored> = {}): WireBlockStored => ({
  type: "BlockStored",
  blockHashes: [H],
  parentHash: null,
  tokenIds: [1, 2],
  blockSize: 2,
  loraId: null,
  medium: "GPU",
  loraName: null,
  ...over,
});

describe("encodeEventBatch", () => {
  it("reproduces the wire-formats §7 vectors byte for byte", () => {
    const removed = { type: "BlockRemoved", blockHashes: [H], medium: "GPU", groupIdx: 0 } as const;
    const cleared = { type: "AllBlocksCleared" } as const;
    const enc = (e: typeof removed | typeof cleared, eventForm: "map" | "array") =>
      encodeEventBatch({ ts: TS, events: [e], dpRank: 0 }, { eventForm });
    expect(hexOf(enc(removed, "map"))).toBe(hexOf(VECTORS.removedMap));
    expect(hexOf(enc(removed, "array"))).toBe(hexOf(VECTORS.removedArray));
    expect(hexOf(enc(cleared, "map"))).toBe(hexOf(VECTORS.clearedMap));
    expect(hexOf(enc(cleared, "array"))).toBe(hexOf(VECTORS.clearedArray));
  });

  it("writes ints in msgspec's smallest width, uint64 only at ≥ 2^63", () => {
    const table: [bigint, string][] = [
      [0n, "00"],
      [127n, "7f"],
      [128n, "cc80"],
      [255n, "ccff"],
      [256n, "cd0100"],
      [65535n, "cdffff"],
      [65536n, "ce00010000"],
      [0xffff_ffffn, "ceffffffff"],
      [0x1_0000_0000n, "cf0000000100000000"],
      [(1n << 63n) - 1n, "cf7fffffffffffffff"],
      [1n << 63n, "cf8000000000000000"],
      [H, "cfdab89baa7b5857c0"],
      [-1n, "ff"],
      [-32n, "e0"],
      [-33n, "d0df"],
      [-128n, "d080"],
      [-129n, "d1ff7f"],
      [-32768n, "d18000"],
      [-32769n, "d2ffff7fff"],
      [-(1n << 31n), "d280000000"],
      [-(1n << 31n) - 1n, "d3ffffffff7fffffff"],
      [-(1n << 63n), "d38000000000000000"],
    ];
    for (const [v, bytes] of table) {
      const w = new MsgpackWriter();
      w.bigint(v);
      expect(hexOf(w.finish()), String(v)).toBe(bytes);
    }
  });

  it("writes the same 64 bits unsigned, signed or as a digest", () => {
    const batch = { ts: 1, dpRank: 0, events: [stored({ blockHashes: [H, 5n, -2n] })] };
    const u = generic(encodeEventBatch(batch, { hashForm: "uint64" })) as unknown[];
    const s = generic(encodeEventBatch(batch, { hashForm: "int64" })) as unknown[];
    const b = generic(
      encodeEventBatch(batch, { hashForm: "binary", digestBytes: 16 }),
    ) as unknown[];
    const hashesOf = (x: unknown[]) => (x[1] as { block_hashes: unknown[] }[])[0]!.block_hashes;
    expect(hashesOf(u)).toEqual([H, 5, 2n ** 64n - 2n]);
    expect(hashesOf(s)).toEqual([BigInt.asIntN(64, H), 5, -2]);
    expect(hashesOf(b)).toEqual([digestOf(H, 16), digestOf(5n, 16), digestOf(-2n, 16)]);
    // A digest's int form is its last 8 bytes, as in vLLM.
    const d = digestOf(H, 32);
    const u2 = generic(
      encodeEventBatch({ ts: 1, dpRank: 0, events: [stored({ blockHashes: [d] })] }),
    );
    expect(hashesOf(u2 as unknown[])).toEqual([H]);
  });

  it("omits trailing defaults in array form and defaults in map form", () => {
    const arr = (e: WireBlockStored, engine: "vllm" | "sglang") =>
      (
        generic(
          encodeEventBatch(
            { ts: 1, events: [e], dpRank: null },
            { eventForm: "array", engine, includeDpRank: false },
          ),
        ) as unknown[][]
      )[1]![0];
    expect(arr(stored(), "vllm")).toEqual(["BlockStored", [H], null, [1, 2], 2, null, "GPU", null]);
    expect(arr(stored({ groupIdx: 0 }), "vllm")).toEqual([
      "BlockStored",
      [H],
      null,
      [1, 2],
      2,
      null,
      "GPU",
      null,
      null,
      0,
    ]);
    expect(arr(stored({ medium: null }), "sglang")).toEqual([
      "BlockStored",
      [H],
      null,
      [1, 2],
      2,
      null,
    ]);
    expect(arr(stored({ cacheSalt: "s" }), "sglang")).toEqual([
      "BlockStored",
      [H],
      null,
      [1, 2],
      2,
      null,
      "GPU",
      "s",
    ]);
    const map = generic(
      encodeEventBatch(
        { ts: 1, events: [stored({ kvCacheSpecKind: "full_attention" })], dpRank: 1 },
        { envelopeForm: "map" },
      ),
    );
    expect(map).toEqual({
      ts: 1,
      events: [
        {
          type: "BlockStored",
          block_hashes: [H],
          parent_block_hash: null,
          token_ids: [1, 2],
          block_size: 2,
          lora_id: null,
          medium: "GPU",
          lora_name: null,
          kv_cache_spec_kind: "full_attention",
        },
      ],
      data_parallel_rank: 1,
    });
  });

  it("always writes ts as float64 and the rank as asked", () => {
    const b = encodeEventBatch({ ts: 5, events: [], dpRank: null });
    expect(hexOf(b)).toBe("93cb401400000000000090c0");
    expect(
      hexOf(encodeEventBatch({ ts: 5, events: [], dpRank: 2 }, { includeDpRank: false })),
    ).toBe("92cb401400000000000090");
    expect(
      generic(
        encodeEventBatch(
          { ts: 5, events: [], dpRank: 2 },
          { envelopeForm: "map", engine: "sglang" },
        ),
      ),
    ).toEqual({
      ts: 5,
      events: [],
      attn_dp_rank: 2,
    });
  });
});
