/**
 * The event fields of vLLM and SGLang (wire-formats §3), by wire name and by position,
 * and how each one is read off the wire. Kept apart from the batch walk in
 * `vllm-codec.ts` so the field tables can be read at a glance.
 *
 * Array events list their fields in declaration order (vLLM and SGLang differ after
 * `medium`); map events name them. A field known for one event type but sent on another
 * counts as an unknown key, like any name we do not know.
 */

import { DecodeFailure, decodeError } from "./decode-error.js";
import type { EngineBlockHash } from "./engine-hash.js";
import type { TapeWriter } from "./event-tape.js";
import { type ExtraBlockKeys, readExtraKeys } from "./extra-keys.js";
import { type MsgpackReader, STR_UNKNOWN } from "./msgpack-reader.js";
import { StrTable } from "./str-table.js";

export const F_BLOCK_HASHES = 0;
export const F_PARENT = 1;
export const F_TOKEN_IDS = 2;
export const F_BLOCK_SIZE = 3;
export const F_LORA_ID = 4;
export const F_MEDIUM = 5;
export const F_LORA_NAME = 6;
export const F_EXTRA_KEYS = 7;
export const F_GROUP_IDX = 8;
export const F_SPEC_KIND = 9;
export const F_SLIDING_WINDOW = 10;
export const F_LOCALITY = 11;
export const F_OWNERSHIP = 12;
export const F_SESSION_ID = 13;
export const F_CACHE_SALT = 14;

/** Wire names, indexed by field id. */
export const FIELD_NAMES: readonly string[] = [
  "block_hashes",
  "parent_block_hash",
  "token_ids",
  "block_size",
  "lora_id",
  "medium",
  "lora_name",
  "extra_keys",
  "group_idx",
  "kv_cache_spec_kind",
  "kv_cache_spec_sliding_window",
  "locality",
  "ownership",
  "session_id",
  "cache_salt",
];

/** Map-event keys: the field names (id = field id), then the tag key. */
export const KEY_TABLE = new StrTable([...FIELD_NAMES, "type"]);
export const KEY_TYPE = FIELD_NAMES.length;

/** Common `medium` values, returned as shared strings instead of decoded each time. */
const MEDIUM_TABLE = new StrTable(["GPU", "CPU", "CPU_PINNED", "DISK", "FS", "OBJ", "STORAGE"]);

/** vLLM `BlockStored`, array form. */
export const VLLM_STORED_ORDER: readonly number[] = [
  F_BLOCK_HASHES,
  F_PARENT,
  F_TOKEN_IDS,
  F_BLOCK_SIZE,
  F_LORA_ID,
  F_MEDIUM,
  F_LORA_NAME,
  F_EXTRA_KEYS,
  F_GROUP_IDX,
  F_SPEC_KIND,
  F_SLIDING_WINDOW,
  F_LOCALITY,
  F_OWNERSHIP,
  F_SESSION_ID,
];

/** SGLang `BlockStored`, array form: same first six fields, then its own. */
export const SGLANG_STORED_ORDER: readonly number[] = [
  F_BLOCK_HASHES,
  F_PARENT,
  F_TOKEN_IDS,
  F_BLOCK_SIZE,
  F_LORA_ID,
  F_MEDIUM,
  F_CACHE_SALT,
  F_SESSION_ID,
];

/** `BlockRemoved`, array form (SGLang stops after `medium`). */
export const REMOVED_ORDER: readonly number[] = [
  F_BLOCK_HASHES,
  F_MEDIUM,
  F_GROUP_IDX,
  F_LOCALITY,
  F_OWNERSHIP,
];

const maskOf = (ids: readonly number[]): number => ids.reduce((m, id) => m | (1 << id), 0);

/** Field ids a map-form event of each type may carry. */
export const STORED_FIELDS = maskOf([...VLLM_STORED_ORDER, F_CACHE_SALT]);
export const REMOVED_FIELDS = maskOf(REMOVED_ORDER);

/** Required in every engine version: arrays shorter than this are malformed. */
export const STORED_MIN_FIELDS = 4;
export const STORED_REQUIRED = maskOf([F_BLOCK_HASHES, F_TOKEN_IDS, F_BLOCK_SIZE]);
export const REMOVED_REQUIRED = maskOf([F_BLOCK_HASHES]);

/**
 * vLLM's `KVCacheSpecKind` values whose blocks are ordinary prefix-cache blocks (full
 * attention over every token, including MLA); everything else (sliding window, mamba,
 * chunked local, cross, encoder-only, unknown) is not the main attention group.
 */
const MAIN_SPEC_KINDS: ReadonlySet<string> = new Set([
  "full_attention",
  "mla_attention",
  "sink_full_attention",
]);

/** True if the kind (as sent; nil = not sent) belongs to the main attention group. */
export function isMainSpecKind(kind: string | null): boolean {
  return kind === null || MAIN_SPEC_KINDS.has(kind.toLowerCase());
}

/** One event's fields as read so far; reset before each event. */
export interface FieldSlots {
  seen: number;
  hashes: EngineBlockHash[];
  parent: EngineBlockHash | null;
  tokens: Uint32Array;
  blockSize: number;
  loraId: number | null;
  medium: string | null;
  loraName: string | null;
  groupIdx: number | null;
  specKind: string | null;
  locality: string | null;
  cacheSalt: string | null;
  /** `extra_keys` per block (null: not sent or nil). */
  extraKeys: ExtraBlockKeys[] | null;
  /**
   * Tape mode (`decodeEventTape`): hashes and tokens go to this writer instead of
   * `hashes`/`parent`/`tokens`, located by the fields below. Not reset per event.
   */
  tape: TapeWriter | null;
  hashPair: number;
  hashCount: number;
  parentPair: number;
  tokenPos: number;
  tokenLen: number;
}

/** Thrown in tape mode at a hash that is not an integer: the batch needs the object form. */
export class NotTapeable extends Error {}

const NO_TOKENS = new Uint32Array(0);

export function emptySlots(): FieldSlots {
  return {
    seen: 0,
    hashes: [],
    parent: null,
    tokens: NO_TOKENS,
    blockSize: 0,
    loraId: null,
    medium: null,
    loraName: null,
    groupIdx: null,
    specKind: null,
    locality: null,
    cacheSalt: null,
    extraKeys: null,
    tape: null,
    hashPair: 0,
    hashCount: 0,
    parentPair: -1,
    tokenPos: 0,
    tokenLen: 0,
  };
}

export function resetSlots(s: FieldSlots): void {
  s.seen = 0;
  s.hashes = [];
  s.parent = null;
  s.tokens = NO_TOKENS;
  s.blockSize = 0;
  s.loraId = null;
  s.medium = null;
  s.loraName = null;
  s.groupIdx = null;
  s.specKind = null;
  s.locality = null;
  s.cacheSalt = null;
  s.extraKeys = null;
  s.hashCount = 0;
  s.parentPair = -1;
  s.tokenLen = 0;
}

/** Read the value of field `id` into `s`; throws `DecodeFailure` naming the field. */
export function readField(r: MsgpackReader, id: number, s: FieldSlots, ev: number): void {
  s.seen |= 1 << id;
  switch (id) {
    case F_BLOCK_HASHES: {
      const n = r.tryArrayHeader();
      if (n < 0) throw fail(r, "bad_event", "expected an array", ev, id);
      if (s.tape !== null) {
        const t = s.tape;
        s.hashPair = t.pairs;
        s.hashCount = n;
        for (let i = 0; i < n; i++) {
          if (!r.tryIntHash()) throw new NotTapeable();
          t.pushPair(r.hashHi, r.hashLo);
        }
        return;
      }
      const out: EngineBlockHash[] = new Array(n);
      for (let i = 0; i < n; i++) {
        const h = r.tryHash();
        if (h === null) throw fail(r, "bad_hash", `block_hashes[${i}] is not a hash:`, ev, id);
        out[i] = h;
      }
      s.hashes = out;
      return;
    }
    case F_PARENT:
      if (r.tryNil()) {
        s.parent = null;
        s.parentPair = -1;
      } else if (s.tape !== null) {
        if (!r.tryIntHash()) throw new NotTapeable();
        s.parentPair = s.tape.pushPair(r.hashHi, r.hashLo);
      } else {
        const h = r.tryHash();
        if (h === null) throw fail(r, "bad_hash", "not a hash or nil:", ev, id);
        s.parent = h;
      }
      return;
    case F_TOKEN_IDS: {
      const n = r.tryArrayHeader();
      if (n < 0) throw fail(r, "bad_tokens", "expected an array", ev, id);
      let out: Uint32Array;
      let at = 0;
      if (s.tape !== null) {
        out = s.tape.reserveTokens(n);
        at = s.tape.tokenCount;
        s.tokenPos = at;
        s.tokenLen = n;
      } else out = new Uint32Array(n);
      for (let i = 0; i < n; i++) {
        const t = r.tryUint32();
        if (t < 0) throw fail(r, "bad_tokens", `token_ids[${i}] is not in [0, 2^32):`, ev, id);
        out[at + i] = t;
      }
      if (s.tape === null) s.tokens = out;
      return;
    }
    case F_BLOCK_SIZE: {
      const n = readInt(r, ev, id, false);
      if (n === null || n < 0) throw fail(r, "bad_event", "expected an integer ≥ 0", ev, id);
      s.blockSize = n;
      return;
    }
    case F_LORA_ID:
      s.loraId = readInt(r, ev, id, true);
      return;
    case F_MEDIUM:
      s.medium = readOptStr(r, ev, id, MEDIUM_TABLE);
      return;
    case F_LORA_NAME:
      s.loraName = readOptStr(r, ev, id);
      return;
    case F_GROUP_IDX: {
      const n = readInt(r, ev, id, true);
      if (n !== null && n < 0) throw fail(r, "bad_event", "expected an integer ≥ 0", ev, id);
      s.groupIdx = n;
      return;
    }
    case F_SPEC_KIND:
      s.specKind = readOptStr(r, ev, id);
      return;
    case F_LOCALITY:
      s.locality = readOptStr(r, ev, id);
      return;
    case F_CACHE_SALT:
      s.cacheSalt = readOptStr(r, ev, id);
      if (s.cacheSalt !== null && s.tape !== null) throw new NotTapeable();
      return;
    case F_EXTRA_KEYS: {
      const extra = readExtraKeys(r);
      if (extra !== null && s.tape !== null) throw new NotTapeable();
      s.extraKeys = extra;
      return;
    }
    default:
      // Known but unused here (sliding window, ownership, session_id): well-formed is
      // all we need.
      r.skip();
      return;
  }
}

function readInt(r: MsgpackReader, ev: number, id: number, nullable: boolean): number | null {
  if (nullable && r.tryNil()) return null;
  let n: number | null;
  try {
    n = r.tryInt();
  } catch {
    throw fail(r, "bad_event", "integer out of range", ev, id);
  }
  if (n === null)
    throw fail(r, "bad_event", `expected an integer${nullable ? " or nil" : ""}`, ev, id);
  return n;
}

function readOptStr(r: MsgpackReader, ev: number, id: number, common?: StrTable): string | null {
  if (r.tryNil()) return null;
  if (common !== undefined) {
    const at = r.pos;
    const known = r.tryStrId(common);
    if (known >= 0) return common.names[known]!;
    if (known === STR_UNKNOWN) r.pos = at;
  }
  const v = r.tryStr();
  if (v === null) throw fail(r, "bad_event", "expected a string or nil", ev, id);
  return v;
}

function fail(
  r: MsgpackReader,
  code: "bad_event" | "bad_hash" | "bad_tokens",
  what: string,
  ev: number,
  id: number,
): DecodeFailure {
  const got = r.describeNext();
  const msg = what.endsWith(":") ? `${what} got ${got}` : `${what}, got ${got}`;
  return new DecodeFailure(decodeError(code, msg, ev, FIELD_NAMES[id] ?? null));
}
