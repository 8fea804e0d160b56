/**
 * The simulated engine's cache events in the form vLLM puts on the wire: `BlockStored`
 * with `medium: "GPU"` and the LoRA name, one-hash `BlockRemoved`, `AllBlocksCleared`.
 */

import type { WireBatch, WireEvent } from "../protocol/event-encoder.js";
import { hashToBigInt } from "./block-hasher.js";
import type { CacheEvent } from "./kv-cache.js";

export function toWireEvent(e: CacheEvent): WireEvent {
  switch (e.type) {
    case "stored":
      return {
        type: "BlockStored",
        blockHashes: e.blockHashes.map(hashToBigInt),
        parentHash: e.parentHash === null ? null : hashToBigInt(e.parentHash),
        tokenIds: e.tokenIds,
        blockSize: e.blockSize,
        loraId: null,
        medium: "GPU",
        loraName: e.loraName,
      };
    case "removed":
      return { type: "BlockRemoved", blockHashes: e.blockHashes.map(hashToBigInt), medium: "GPU" };
    case "cleared":
      return { type: "AllBlocksCleared" };
  }
}

/** One engine step's events as a batch stamped `tsSeconds`, from data-parallel rank `dpRank`. */
export function toWireBatch(
  events: readonly CacheEvent[],
  tsSeconds: number,
  dpRank: number,
): WireBatch {
  return { ts: tsSeconds, events: events.map(toWireEvent), dpRank };
}
