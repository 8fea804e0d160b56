/**
 * Cache events, as the router understands them after decoding any engine's wire
 * variant (see `vllm-codec.ts`, wire-formats §3). A discriminated union on `type`;
 * handle it with an exhaustive switch.
 */

import type { EngineBlockHash } from "./engine-hash.js";

/**
 * Where a block lives. Engines report a free-form `medium`; the router folds it into
 * three tiers: GPU memory, host memory, and disk-or-other (anything slower).
 */
export type Tier = "gpu" | "host" | "disk";

export const TIERS: readonly Tier[] = ["gpu", "host", "disk"];

/**
 * Map an engine's `medium` string (nil on old versions = GPU) to a tier: `GPU` → gpu;
 * `CPU`, `CPU_PINNED`, `MEMORY` → host; anything else (`DISK`, `STORAGE`, `FS`, `OBJ`,
 * names to come) → disk, the slowest tier, so an unknown medium is never taken for GPU.
 */
export function tierOfMedium(medium: string | null | undefined): Tier {
  if (medium === null || medium === undefined || medium === "") return "gpu";
  switch (medium.toUpperCase()) {
    case "GPU":
      return "gpu";
    case "CPU":
    case "CPU_PINNED":
    case "MEMORY":
      return "host";
    default:
      return "disk";
  }
}

/**
 * The tier of a block given its `medium` and vLLM's `locality` (≥ 0.26; nil = LOCAL). A
 * REMOTE block lives outside the worker (a shared or remote KV store it can load from):
 * it counts as held, but at the slowest tier, whatever its medium, because reaching it
 * costs a transfer (docs/block-keys.md, "Tiers").
 */
export function tierOf(
  medium: string | null | undefined,
  locality: string | null | undefined,
): Tier {
  if (locality !== null && locality !== undefined && locality.toUpperCase() === "REMOTE") {
    return "disk";
  }
  return tierOfMedium(medium);
}

/** Newly cached full blocks of one request (or an offload of known blocks to a tier). */
export interface BlockStoredEvent {
  readonly type: "stored";
  /** One engine hash per block, in sequence order. */
  readonly blockHashes: readonly EngineBlockHash[];
  /** Engine hash of the block before the first one; null = the sequence starts at the root. */
  readonly parentHash: EngineBlockHash | null;
  /**
   * `blockHashes.length × blockSize` token ids; empty for offload placeholders that
   * refer to blocks already known by engine hash.
   */
  readonly tokenIds: ArrayLike<number>;
  /** Tokens per block; 0 on offload placeholders. */
  readonly blockSize: number;
  /** Deprecated numeric LoRA id, kept for logs; the name is what separates caches. */
  readonly loraId: number | null;
  /** LoRA adapter name; null = base model. */
  readonly loraName: string | null;
  /** The engine's medium string as sent (null = not sent). */
  readonly medium: string | null;
  readonly tier: Tier;
  /**
   * The request's cache salt, when the engine folded one into this chain's first block
   * (vLLM: `extra_keys[0]` of a chain from the root; SGLang: `cache_salt`). Requests
   * must name the same salt to match (docs/block-keys.md). Absent/null: none.
   */
  readonly cacheSalt?: string | null;
  /**
   * Index of the first block whose engine hash folds in extra keys the router cannot
   * reproduce (multimodal hashes, prompt-embedding digests): that block and every later
   * one of the chain must never match a request. Absent/null: all reproducible.
   */
  readonly opaqueFrom?: number | null;
}

/** Blocks evicted from one tier. */
export interface BlockRemovedEvent {
  readonly type: "removed";
  readonly blockHashes: readonly EngineBlockHash[];
  readonly medium: string | null;
  readonly tier: Tier;
}

/** The publisher's whole prefix cache was reset. */
export interface AllBlocksClearedEvent {
  readonly type: "cleared";
}

export type KvEvent = BlockStoredEvent | BlockRemovedEvent | AllBlocksClearedEvent;

/** One decoded batch: the unit that carries a sequence number on the wire. */
export interface EventBatch {
  /** Seconds since the epoch (Mooncake's int64 milliseconds are converted). */
  readonly ts: number;
  readonly events: readonly KvEvent[];
  /** Data-parallel rank the batch says it came from; null when not sent. */
  readonly dpRank: number | null;
}
