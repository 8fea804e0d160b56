import { encode } from "@msgpack/msgpack";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { DECODE_ERROR_CODES } from "./decode-error.js";
import { engineHashFromString, engineHashInModel } from "./engine-hash.js";
import type { KvEvent } from "./events.js";
import { MooncakeStoreAdapter } from "./mooncake-adapter.js";
import { decodeMooncakeBatch, type MooncakeBatch } from "./mooncake-codec.js";
import { encodeMooncakeBatch, type MooncakeWireEvent } from "./mooncake-encoder.js";
import { modelChain } from "./store-model.js";

const MEM = ["memory", "tcp://127.0.0.1:6000"] as const;
const DISK = ["disk", "/data/blocks/k1.bin"] as const;
const LDISK = ["local_disk", "tcp://127.0.0.1:7000"] as const;
const h = engineHashFromString;

function decoded(events: MooncakeWireEvent[], tsForm: "seconds" | "millis" = "millis") {
  const r = decodeMooncakeBatch(encodeMooncakeBatch({ ts: 1789095808.5, events }, { tsForm }));
  if (!r.ok) throw new Error(r.error.message);
  return r;
}

describe("decodeMooncakeBatch", () => {
  it("decodes the seed's three events, ts in ms or seconds", () => {
    const events: MooncakeWireEvent[] = [
      {
        type: "BlockStoreEvent",
        key: "key_12345",
        replicas: [MEM, DISK, LDISK],
        modelName: "llama2-7b",
        blockSize: 512,
        blockHash: "0x41234125",
        parentBlockHash: "0x51512342",
        tokenIds: [1, 2, 3, 4, 5],
      },
      { type: "BlockUpdateEvent", key: "key_12345", replicas: [MEM] },
      { type: "RemoveAllEvent" },
    ];
    for (const tsForm of ["millis", "seconds"] as const) {
      const r = decoded(events, tsForm);
      expect(r.batch.ts).toBeCloseTo(1789095808.5, 3);
      expect(r.batch.events).toEqual([
        {
          type: "BlockStoreEvent",
          key: "key_12345",
          replicas: [
            { type: "memory", location: MEM[1] },
            { type: "disk", location: DISK[1] },
            { type: "local_disk", location: LDISK[1] },
          ],
          modelName: "llama2-7b",
          blockSize: 512,
          blockHash: h("0x41234125"),
          parentHash: h("0x51512342"),
          tokenIds: Uint32Array.of(1, 2, 3, 4, 5),
        },
        {
          type: "BlockUpdateEvent",
          key: "key_12345",
          replicas: [{ type: "memory", location: MEM[1] }],
        },
        { type: "RemoveAllEvent" },
      ]);
    }
  });

  it("reads unset values as null/empty and counts unknown tags and fields", () => {
    const r = decodeMooncakeBatch(
      encode([
        1000,
        [
          ["BlockStoreEvent", "k", [], "", 0, "", "", [], "extra"],
          ["FutureEvent", 1],
          ["BlockStoreEvent", "k2", [["memory"]]],
        ],
      ]),
    );
    if (!r.ok) throw new Error(r.error.message);
    expect(r.batch.ts).toBe(1);
    expect(r.batch.events[0]).toMatchObject({
      blockHash: null,
      parentHash: null,
      modelName: "",
      blockSize: 0,
    });
    expect(r.batch.events[1]).toMatchObject({
      key: "k2",
      replicas: [{ type: "memory", location: "" }],
      tokenIds: new Uint32Array(0),
    });
    expect(r.skipped).toEqual({ unknownTag: 1, nonMainGroup: 0, unknownKeys: 1 });
  });

  it("rejects malformed batches with a typed error and never throws", () => {
    const bad: [unknown, string][] = [
      [[1], "bad_envelope"],
      [["x", []], "bad_envelope"],
      [[1, [[5]]], "bad_event"],
      [[1, [["BlockUpdateEvent", "k"]]], "bad_event"],
      [[1, [["BlockUpdateEvent", 3, []]]], "bad_event"],
      [[1, [["BlockUpdateEvent", "k", [[1, "x"]]]]], "bad_event"],
      [[1, [["BlockStoreEvent", "k", [], "", 0, 1.5, "", []]]], "bad_hash"],
      [[1, [["BlockStoreEvent", "k", [], "", 0, "", "", [-1]]]], "bad_tokens"],
    ];
    for (const [v, code] of bad) {
      const r = decodeMooncakeBatch(encode(v));
      expect(r.ok ? "ok" : r.error.code, JSON.stringify(v)).toBe(code);
    }
    expect(decodeMooncakeBatch(new Uint8Array([0xc1])).ok).toBe(false);
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (b) => {
        const r = decodeMooncakeBatch(b);
        if (!r.ok) expect(DECODE_ERROR_CODES).toContain(r.error.code);
      }),
      { numRuns: 1000 },
    );
  });
});

describe("MooncakeStoreAdapter", () => {
  const run = (a: MooncakeStoreAdapter, events: MooncakeWireEvent[]): KvEvent[] =>
    a.applyBatch(decoded(events).batch as MooncakeBatch);
  const store = (
    key: string,
    replicas: (readonly [string, string])[],
    blockHash = "",
    parent = "",
  ) =>
    ({
      type: "BlockStoreEvent",
      key,
      replicas,
      blockHash,
      parentBlockHash: parent,
      blockSize: 64,
      tokenIds: [1, 2, 3, 4],
    }) as const;

  it("stores a block once per tier (memory → host, disk/local_disk → disk)", () => {
    const a = new MooncakeStoreAdapter();
    const out = run(a, [store("k1", [MEM, DISK, LDISK], "0xa1", "0xa0")]);
    const common = {
      type: "stored",
      blockHashes: [h("0xa1")],
      parentHash: h("0xa0"),
      tokenIds: Uint32Array.of(1, 2, 3, 4),
      blockSize: 4,
      loraId: null,
      loraName: null,
    };
    expect(out).toEqual([
      { ...common, medium: "memory", tier: "host" },
      { ...common, medium: "disk", tier: "disk" },
    ]);
    expect(a.stats().keys).toBe(1);
  });

  it("uses the mooncake key as the id when the block hash is unset", () => {
    const out = run(new MooncakeStoreAdapter(), [store("k9", [MEM])]);
    expect(out[0]).toMatchObject({ blockHashes: [h("k9")], parentHash: null });
  });

  it("turns replica-list updates into tier adds and removes", () => {
    const a = new MooncakeStoreAdapter();
    run(a, [store("k1", [MEM], "0xa1")]);
    expect(run(a, [{ type: "BlockUpdateEvent", key: "k1", replicas: [MEM, LDISK] }])).toEqual([
      {
        type: "stored",
        blockHashes: [h("0xa1")],
        parentHash: null,
        tokenIds: new Uint32Array(0),
        blockSize: 0,
        loraId: null,
        loraName: null,
        medium: "local_disk",
        tier: "disk",
      },
    ]);
    expect(run(a, [{ type: "BlockUpdateEvent", key: "k1", replicas: [DISK] }])).toEqual([
      { type: "removed", blockHashes: [h("0xa1")], medium: "memory", tier: "host" },
    ]);
    expect(run(a, [{ type: "BlockUpdateEvent", key: "k1", replicas: [] }])).toEqual([
      // The tier's medium is the latest replica type seen for it.
      { type: "removed", blockHashes: [h("0xa1")], medium: "disk", tier: "disk" },
    ]);
    expect(a.stats().keys).toBe(0);
    expect(run(a, [{ type: "BlockUpdateEvent", key: "k1", replicas: [MEM] }])).toEqual([]);
    expect(a.stats().unknownKeyUpdates).toBe(1);
  });

  it("keeps a block on a tier while another key still holds it", () => {
    const a = new MooncakeStoreAdapter();
    expect(run(a, [store("shard0", [MEM], "0xb"), store("shard1", [MEM], "0xb")])).toHaveLength(1);
    expect(run(a, [{ type: "BlockUpdateEvent", key: "shard0", replicas: [] }])).toEqual([]);
    expect(run(a, [{ type: "BlockUpdateEvent", key: "shard1", replicas: [] }])).toEqual([
      { type: "removed", blockHashes: [h("0xb")], medium: "memory", tier: "host" },
    ]);
  });

  it("re-storing a key under another hash replaces the old block", () => {
    const a = new MooncakeStoreAdapter();
    run(a, [store("k", [MEM], "0x1")]);
    const out = run(a, [store("k", [MEM], "0x2")]);
    expect(out.map((e) => [e.type, e.type !== "cleared" && e.blockHashes[0]])).toEqual([
      ["removed", h("0x1")],
      ["stored", h("0x2")],
    ]);
    expect(a.stats()).toMatchObject({ keys: 1, rekeyed: 1 });
  });

  it("keeps the same hash stored for two models apart, each under its model's chain", () => {
    const a = new MooncakeStoreAdapter();
    const m1 = { ...store("m1/k", [MEM], "0xc", ""), modelName: "m1" };
    const m2 = { ...store("m2/k", [MEM], "0xc", ""), modelName: "m2" };
    const m2Child = { ...store("m2/k2", [MEM], "0xd", "0xc"), modelName: "m2" };
    const out = run(a, [m1, m2, m2Child]);
    expect(
      out.map((e) => e.type === "stored" && [e.blockHashes[0], e.parentHash, e.loraName]),
    ).toEqual([
      [engineHashInModel("m1", h("0xc")), null, modelChain("m1", null)],
      [engineHashInModel("m2", h("0xc")), null, modelChain("m2", null)],
      // A child continues its parent's chain: the parent is the model's too.
      [engineHashInModel("m2", h("0xd")), engineHashInModel("m2", h("0xc")), null],
    ]);
    // Not one block held by two keys: m1's goes when m1's key does.
    expect(run(a, [{ type: "BlockUpdateEvent", key: "m1/k", replicas: [] }])).toEqual([
      {
        type: "removed",
        blockHashes: [engineHashInModel("m1", h("0xc"))],
        medium: "memory",
        tier: "host",
      },
    ]);
    // A key re-stored for another model is another block.
    expect(run(a, [{ ...m2, modelName: "m3" }]).map((e) => e.type)).toEqual(["removed", "stored"]);
    expect(a.stats().rekeyed).toBe(1);
  });

  it("RemoveAllEvent clears the holder and the adapter's state; empty stores are counted", () => {
    const a = new MooncakeStoreAdapter();
    run(a, [store("k1", [MEM]), store("k2", [])]);
    expect(a.stats()).toMatchObject({ keys: 1, emptyStores: 1 });
    expect(run(a, [{ type: "RemoveAllEvent" }])).toEqual([{ type: "cleared" }]);
    expect(a.stats().keys).toBe(0);
    expect(run(a, [{ type: "BlockUpdateEvent", key: "k1", replicas: [] }])).toEqual([]);
  });
});
