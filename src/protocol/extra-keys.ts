/**
 * vLLM's per-block `extra_keys` (and what they mean for the router's keys): read from
 * the wire into a small summary per block, then classified into a cache salt and the
 * first block the router cannot key (docs/block-keys.md, "Extra keys").
 */

import type { MsgpackReader } from "./msgpack-reader.js";

/**
 * One block's `extra_keys` entry: null (nil), the tuple's scalar elements (strings and
 * integers: LoRA name or id, cache salt, old-style multimodal hash strings), or
 * `OPAQUE_EXTRA` when it holds anything else (vLLM's `(mm identifier, offset)` pairs,
 * prompt-embedding digests as bytes), which the router can never reproduce.
 */
export type ExtraBlockKeys = null | readonly (string | number)[] | typeof OPAQUE_EXTRA;
export const OPAQUE_EXTRA = "opaque" as const;

/**
 * `extra_keys`: nil (null), or an array with one entry (nil or a tuple) per block; null
 * too when every entry is nil. Any other value cannot be understood, so no block of the
 * event is keyable: `[OPAQUE_EXTRA]`.
 */
export function readExtraKeys(r: MsgpackReader): ExtraBlockKeys[] | null {
  if (r.tryNil()) return null;
  const n = r.tryArrayHeader();
  if (n < 0) {
    r.skip();
    return [OPAQUE_EXTRA];
  }
  const out: ExtraBlockKeys[] = [];
  let any = false;
  for (let i = 0; i < n; i++) {
    if (r.tryNil()) {
      out.push(null);
      continue;
    }
    any = true;
    const m = r.tryArrayHeader();
    if (m < 0) {
      r.skip();
      out.push(OPAQUE_EXTRA);
      continue;
    }
    const values: (string | number)[] = [];
    let opaque = false;
    for (let j = 0; j < m; j++) {
      const v = r.isStr() ? r.tryStr() : r.isInt() ? safeInt(r) : null;
      if (v === null) {
        if (!r.isStr() && !r.isInt()) r.skip();
        opaque = true;
      } else values.push(v);
    }
    out.push(opaque ? OPAQUE_EXTRA : values);
  }
  return any ? out : null;
}

function safeInt(r: MsgpackReader): number | null {
  try {
    return r.tryInt();
  } catch {
    r.skip();
    return null;
  }
}

/**
 * What a stored event's extra keys mean for the router (vLLM's
 * `generate_block_hash_extra_keys`: LoRA name, then multimodal keys, then the cache salt
 * on the block that starts at token 0, then prompt-embedding digests). A leading LoRA
 * name (or old numeric id) equal to the event's own is reproducible; so is one string
 * left on the first block of a chain from the root: the cache salt. Anything else makes
 * that block, and the chain after it, unmatchable. A multimodal hash string alone on a
 * root block is read as a salt too: no request names it, so it never matches either.
 */
export function classifyExtraKeys(
  blocks: readonly ExtraBlockKeys[],
  loraName: string | null,
  loraId: number | null,
  fromRoot: boolean,
): { salt: string | null; opaqueFrom: number | null } {
  let salt: string | null = null;
  for (let i = 0; i < blocks.length; i++) {
    const b = blocks[i]!;
    if (b === null) continue;
    if (b === OPAQUE_EXTRA) return { salt, opaqueFrom: i };
    let k = 0;
    const first = b[0];
    if (first !== undefined && ((loraName !== null && first === loraName) || first === loraId)) k++;
    const rest = b.length - k;
    if (rest === 0) continue;
    if (i === 0 && fromRoot && rest === 1 && typeof b[k] === "string") {
      salt = b[k] as string;
      continue;
    }
    return { salt, opaqueFrom: i };
  }
  return { salt, opaqueFrom: null };
}
