/**
 * The simulated cache's engine events as the router's `KvEvent`s: the same conversion a
 * subscriber performs after decoding the wire (engine hashes as unsigned 64-bit ints,
 * medium "GPU"), without the msgpack round trip the replay does not need.
 */

import { type EngineBlockHash, engineHashFromBigInt } from "../protocol/engine-hash.js";
import type { KvEvent } from "../protocol/events.js";
import type { CacheEvent } from "../sim/kv-cache.js";

const GPU = "GPU";

function hashes(values: readonly bigint[]): EngineBlockHash[] {
  const out = new Array<EngineBlockHash>(values.length);
  for (let i = 0; i < values.length; i++) out[i] = engineHashFromBigInt(values[i]!);
  return out;
}

/** One engine cache event → one router event. */
export function toKvEvent(e: CacheEvent): KvEvent {
  switch (e.type) {
    case "stored":
      return {
        type: "stored",
        blockHashes: hashes(e.blockHashes),
        parentHash: e.parentHash === null ? null : engineHashFromBigInt(e.parentHash),
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
