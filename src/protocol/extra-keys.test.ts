import { describe, expect, it } from "vitest";
import { encodeEventBatch, type WireBlockStored } from "./event-encoder.js";
import { TapeWriter } from "./event-tape.js";
import { tierOf } from "./events.js";
import { classifyExtraKeys, OPAQUE_EXTRA } from "./extra-keys.js";
import { decodeEventBatch, decodeEventTape } from "./vllm-codec.js";

const stored = (extra: Partial<WireBlockStored>): WireBlockStored => ({
  type: "BlockStored",
  blockHashes: [1n, 2n, 3n],
  parentHash: null,
  tokenIds: Array.from({ length: 48 }, (_, i) => i),
  blockSize: 16,
  loraId: null,
  medium: "GPU",
  loraName: null,
  ...extra,
});

function decodeOne(e: WireBlockStored, engine: "vllm" | "sglang" = "vllm") {
  const r = decodeEventBatch(encodeEventBatch({ ts: 1, dpRank: 0, events: [e] }, { engine }), {
    fieldOrder: engine,
  });
  if (!r.ok) throw new Error(r.error.message);
  return r.batch.events[0]!;
}

describe("extra keys (vLLM extra_keys, SGLang cache_salt)", () => {
  it.each<[string, Parameters<typeof classifyExtraKeys>, ReturnType<typeof classifyExtraKeys>]>([
    ["nothing", [[null, null], null, null, true], { salt: null, opaqueFrom: null }],
    [
      "a salt on the root block",
      [[["s1"], null], null, null, true],
      { salt: "s1", opaqueFrom: null },
    ],
    [
      "LoRA name then salt",
      [[["ad", "s1"], ["ad"]], "ad", 7, true],
      { salt: "s1", opaqueFrom: null },
    ],
    ["old numeric LoRA id", [[[7], [7]], null, 7, true], { salt: null, opaqueFrom: null }],
    ["a string past block 0", [[null, ["img"]], null, null, true], { salt: null, opaqueFrom: 1 }],
    ["a string off the root", [[["s1"]], null, null, false], { salt: null, opaqueFrom: 0 }],
    [
      "an (mm id, offset) pair",
      [[null, OPAQUE_EXTRA], null, null, true],
      { salt: null, opaqueFrom: 1 },
    ],
    [
      "salt and image on block 0",
      [[["img", "s1"]], null, null, true],
      { salt: null, opaqueFrom: 0 },
    ],
  ])("classifies %s", (_name, args, expected) => {
    expect(classifyExtraKeys(...args)).toEqual(expected);
  });

  it("decodes a map-encoded vLLM event's extra keys per block", () => {
    const e = decodeOne(stored({ extraKeys: [["salt-a"], null, [["mm-hash", 3]]] }));
    expect(e).toMatchObject({ type: "stored", cacheSalt: "salt-a", opaqueFrom: 2 });
    const plain = decodeOne(stored({ extraKeys: null }));
    expect(plain).not.toHaveProperty("cacheSalt");
  });

  it("makes an event with extra_keys it cannot read unkeyable, not undecodable", () => {
    const e = decodeOne(stored({ extraFields: [["extra_keys", "not a list"]] }));
    expect(e).toMatchObject({ type: "stored", opaqueFrom: 0 });
  });

  it("reads SGLang's cache_salt", () => {
    const e = decodeOne(stored({ cacheSalt: "tenant-9", loraName: null }), "sglang");
    expect(e).toMatchObject({ cacheSalt: "tenant-9", opaqueFrom: null });
  });

  it("leaves events with extra keys to the object decoder (no tape)", () => {
    const withKeys = encodeEventBatch({
      ts: 1,
      dpRank: 0,
      events: [stored({ extraKeys: [["s"]] })],
    });
    expect(decodeEventTape(withKeys, new TapeWriter())).toBeNull();
    const plain = encodeEventBatch({ ts: 1, dpRank: 0, events: [stored({ extraKeys: [null] })] });
    expect(decodeEventTape(plain, new TapeWriter())).not.toBeNull();
  });

  it.each([
    ["GPU", null, "gpu"],
    ["CPU_PINNED", null, "host"],
    ["CPU", "LOCAL", "host"],
    ["STORAGE", null, "disk"],
    ["FS", null, "disk"],
    ["OBJ", null, "disk"],
    ["GPU", "REMOTE", "disk"],
    ["CPU", "remote", "disk"],
  ] as const)("maps medium %s, locality %s to %s", (medium, locality, tier) => {
    expect(tierOf(medium, locality)).toBe(tier);
    const e = decodeOne(stored({ medium, locality }));
    expect(e).toMatchObject({ tier });
    const removed = decodeEventBatch(
      encodeEventBatch({
        ts: 1,
        dpRank: 0,
        events: [{ type: "BlockRemoved", blockHashes: [1n], medium, locality }],
      }),
    );
    expect(removed.ok && removed.batch.events[0]).toMatchObject({ tier });
  });

  it("gives the event after a REMOTE one its own tier back", () => {
    const r = decodeEventBatch(
      encodeEventBatch({
        ts: 1,
        dpRank: 0,
        events: [stored({ medium: null, locality: "REMOTE" }), stored({ medium: null })],
      }),
    );
    expect(r.ok && r.batch.events.map((e) => (e.type === "stored" ? e.tier : null))).toEqual([
      "disk",
      "gpu",
    ]);
  });
});
