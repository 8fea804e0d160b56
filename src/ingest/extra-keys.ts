/**
 * Stored events whose engine hashes fold in extra keys (vLLM `extra_keys`, SGLang
 * `cache_salt`), made into what the index can key exactly like a request
 * (docs/block-keys.md, "Extra keys"):
 * - a cache salt on a chain from the root moves the chain under `chainName(lora, salt)`,
 *   the root a request with the same `cache_salt` computes;
 * - blocks from the first one whose extra keys the router cannot reproduce (image
 *   hashes, prompt-embedding digests) are dropped: they, and every block chained after
 *   them, must never match a text prompt. Later events whose parent is one of them find
 *   no parent in the index and are not indexed either.
 */

import { chainName } from "../index/block-key.js";
import type { BlockStoredEvent } from "../protocol/events.js";

/** The event to index (itself when nothing applies), or null when no block is keyable. */
export function keyableStored(e: BlockStoredEvent): BlockStoredEvent | null {
  const salt = e.cacheSalt ?? null;
  const opaque = e.opaqueFrom ?? null;
  if (salt === null && opaque === null) return e;
  let out = e;
  if (opaque !== null) {
    if (opaque <= 0) return null;
    const tokens = e.tokenIds;
    const n = opaque * e.blockSize;
    out = {
      ...out,
      blockHashes: e.blockHashes.slice(0, opaque),
      tokenIds:
        tokens.length === 0
          ? tokens
          : ArrayBuffer.isView(tokens)
            ? (tokens as Uint32Array).subarray(0, n)
            : Array.prototype.slice.call(tokens, 0, n),
    };
  }
  if (salt !== null && e.parentHash === null) {
    // The index roots a name-less adapter id the same way (radix-tree.ts `adapterOf`).
    const adapter =
      e.loraName !== null && e.loraName !== ""
        ? e.loraName
        : e.loraId
          ? `\u0000lora_id:${e.loraId}`
          : null;
    out = { ...out, loraName: chainName(adapter, salt) };
  }
  return out;
}
