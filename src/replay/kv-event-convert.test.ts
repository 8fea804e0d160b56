import { describe, expect, it } from "vitest";
import { engineHashFromBigInt } from "../protocol/engine-hash.js";
import { hashToBigInt } from "../sim/block-hasher.js";
import { type CacheEvent, PagedKvCache } from "../sim/kv-cache.js";
import { toWireEvent } from "../sim/wire-events.js";
import { toKvEvent } from "./kv-event-convert.js";

describe("toKvEvent", () => {
  it("gives the hashes a subscriber would normalise from the wire's integers", () => {
    const events: CacheEvent[] = [];
    const cache = new PagedKvCache({ numBlocks: 4, blockSize: 4, seed: 7 }, (e) => events.push(e));
    const a = cache.sequence(Array.from({ length: 12 }, (_, i) => i * 977));
    expect(cache.admit(a)).not.toBeNull();
    cache.free(a);
    const b = cache.sequence(Array.from({ length: 12 }, (_, i) => i * 13 + 5));
    expect(cache.admit(b)).not.toBeNull(); // evicts a's blocks: removed events
    expect(events.some((e) => e.type === "removed")).toBe(true);
    for (const e of events) {
      const wire = toWireEvent(e);
      const kv = toKvEvent(e);
      if (wire.type === "BlockStored" && kv.type === "stored") {
        expect(kv.blockHashes).toEqual(
          wire.blockHashes.map((h) => engineHashFromBigInt(h as bigint)),
        );
        const p = wire.parentHash;
        expect(kv.parentHash).toBe(p === null ? null : engineHashFromBigInt(p as bigint));
      } else if (wire.type === "BlockRemoved" && kv.type === "removed") {
        expect(kv.blockHashes).toEqual(
          wire.blockHashes.map((h) => engineHashFromBigInt(h as bigint)),
        );
      } else throw new Error(`mismatched event kinds ${wire.type} / ${kv.type}`);
    }
    expect(hashToBigInt("ffffffffffffffff")).toBe(2n ** 64n - 1n);
  });
});
