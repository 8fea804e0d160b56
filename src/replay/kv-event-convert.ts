/**
 * The simulated cache's engine events as the router's `KvEvent`s: the same conversion a
 * subscriber performs after decoding the wire (engine hashes as unsigned 64-bit ints,
 * medium "GPU"), without the msgpack round trip the replay does not need.
 *
 * The simulator's hash *is* the 16 lowercase hex digits of the unsigned 64-bit value,
 * which is exactly `engineHashFromBigInt` of the wire's integer (tested in
 * `kv-event-convert.test.ts`), so it is taken as is rather than going through a BigInt.
 */

import type { EngineBlockHash } from "../protocol/engine-hash.js";
import type { KvEvent } from "../protocol/events.js";
import type { SimBlockHash } from "../sim/block-hasher.js";
import type { CacheEvent } from "../sim/kv-cache.js";

const GPU = "GPU";

function engineHash(h: SimBlockHash): EngineBlockHash {
  return h as EngineBlockHash;
}

function hashes(values: readonly SimBlockHash[]): EngineBlockHash[] {
  return values as EngineBlockHash[];
}

/** One engine cache event → one router event. */
export function toKvEvent(e: CacheEvent): KvEvent {
  switch (e.type) {
    case "stored":
      return {
        type: "stored",
        blockHashes: hashes(e.blockHashes),
        parentHash: e.parentHash === null ? null : engineHash(e.parentHash),
        tokenIds: e.tokenIds,
        blockSize: e.blockSize,
        loraId: null,
        loraName: e.loraName,
        medium: GPU,
        tier: "gpu",
      };
    case "removed":
      return { type: "removed", blockHashes: hashes(e.blockHashes), medium: GPU, tier: "gpu" };
    case "cleared":
      return { type: "cleared" };
    default: {
      const never: never = e;
      throw new Error(`unknown cache event ${JSON.stringify(never)}`);
    }
  }
}
