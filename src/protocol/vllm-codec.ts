/**
 * Decoder for vLLM and SGLang KV event batches (wire-formats §2–§4): every envelope and
 * event variant those engines have shipped, normalised into `KvEvent`s.
 *
 * It walks the msgpack bytes once with `MsgpackReader` (no intermediate object tree, no
 * BigInt per hash) because it sits on the ingest hot path. It never throws: a malformed
 * batch is one typed `DecodeError`; what is skipped on purpose (unknown tags, events of
 * non-main KV cache groups, unknown keys) is counted, not an error.
 */

import {
  type DecodeError,
  DecodeFailure,
  decodeError,
  emptySkipCounts,
  type SkipCounts,
} from "./decode-error.js";
import { type EventBatch, type KvEvent, type Tier, tierOfMedium } from "./events.js";
import { MsgpackFormatError, MsgpackReader, NOT_STR } from "./msgpack-reader.js";
import { StrTable } from "./str-table.js";
import {
  emptySlots,
  F_BLOCK_HASHES,
  type FieldSlots,
  isMainSpecKind,
  KEY_TABLE,
  KEY_TYPE,
  REMOVED_FIELDS,
  REMOVED_ORDER,
  REMOVED_REQUIRED,
  readField,
  resetSlots,
  SGLANG_STORED_ORDER,
  STORED_FIELDS,
  STORED_MIN_FIELDS,
  STORED_REQUIRED,
  VLLM_STORED_ORDER,
} from "./vllm-fields.js";

export type DecodeResult =
  | { readonly ok: true; readonly batch: EventBatch; readonly skipped: SkipCounts }
  | { readonly ok: false; readonly error: DecodeError };

/**
 * Which engine's field order to assume for array-form `BlockStored` events. They agree up
 * to `medium`; then vLLM sends `lora_name, extra_keys, …` and SGLang `cache_salt,
 * session_id`. `auto` reads a string in the 8th field as SGLang's `session_id` (vLLM's
 * `extra_keys` is a list or nil) and otherwise assumes vLLM, so a lone string in the 7th
 * field is taken as a LoRA name. Map-form events name their fields and need no guess.
 */
export type FieldOrder = "auto" | "vllm" | "sglang";

export interface DecodeOptions {
  readonly fieldOrder?: FieldOrder;
}

/** Decode one msgpack event batch (the third frame of a ZeroMQ message). Never throws. */
export function decodeEventBatch(payload: Uint8Array, options?: DecodeOptions): DecodeResult {
  const ctx: Ctx = {
    r: new MsgpackReader(payload),
    order: options?.fieldOrder ?? "auto",
    skipped: emptySkipCounts(),
    slots: emptySlots(),
    ev: -1,
    medium: null,
    tier: "gpu",
  };
  try {
    const batch = readBatch(ctx);
    if (!ctx.r.atEnd) {
      const extra = payload.length - ctx.r.pos;
      return failed(decodeError("not_msgpack", `${extra} trailing bytes after the batch`));
    }
    return { ok: true, batch, skipped: ctx.skipped };
  } catch (e) {
    if (e instanceof DecodeFailure) return failed(e.error);
    const at = ctx.ev >= 0 ? ctx.ev : null;
    if (e instanceof MsgpackFormatError) return failed(decodeError("not_msgpack", e.message, at));
    // Anything else is a bug here, but one bad payload must still not stop ingestion.
    return failed(decodeError("not_msgpack", `unexpected: ${String(e)}`, at));
  }
}

interface Ctx {
  readonly r: MsgpackReader;
  readonly order: FieldOrder;
  readonly skipped: SkipCounts;
  readonly slots: FieldSlots;
  /** Index of the event being read, -1 outside events (for error locations). */
  ev: number;
  /** Last medium seen and its tier: a batch almost always repeats one medium. */
  medium: string | null;
  tier: Tier;
}

function failed(error: DecodeError): DecodeResult {
  return { ok: false, error };
}

function envelopeFailure(ctx: Ctx, what: string, field: string): DecodeFailure {
  return new DecodeFailure(
    decodeError("bad_envelope", `${what}, got ${ctx.r.describeNext()}`, null, field),
  );
}

function readBatch(ctx: Ctx): EventBatch {
  const r = ctx.r;
  let ts: number | null = null;
  let events: KvEvent[] | null = null;
  let dpRank: number | null = null;
  const n = r.tryArrayHeader();
  if (n >= 0) {
    if (n < 2) throw new DecodeFailure(decodeError("bad_envelope", `batch array of ${n} items`));
    ts = readTs(ctx);
    events = readEvents(ctx);
    if (n >= 3) dpRank = readDpRank(ctx, "data_parallel_rank");
    for (let i = 3; i < n; i++) {
      r.skip();
      ctx.skipped.unknownKeys++;
    }
    return { ts, events, dpRank };
  }
  const m = r.tryMapHeader();
  if (m < 0) throw envelopeFailure(ctx, "expected an array or map batch", "batch");
  for (let i = 0; i < m; i++) {
    const key = r.tryStr();
    if (key === null) throw envelopeFailure(ctx, "batch map key is not a string", "batch");
    switch (key) {
      case "ts":
        ts = readTs(ctx);
        break;
      case "events":
        events = readEvents(ctx);
        break;
      case "data_parallel_rank":
      case "attn_dp_rank":
        dpRank = readDpRank(ctx, key);
        break;
      default:
        r.skip();
        ctx.skipped.unknownKeys++;
    }
  }
  if (ts === null) throw new DecodeFailure(decodeError("bad_envelope", "batch has no ts"));
  if (events === null) throw new DecodeFailure(decodeError("bad_envelope", "batch has no events"));
  return { ts, events, dpRank };
}

function readTs(ctx: Ctx): number {
  const ts = ctx.r.tryNumber();
  if (ts === null || !Number.isFinite(ts)) throw envelopeFailure(ctx, "ts is not a number", "ts");
  return ts;
}

function readDpRank(ctx: Ctx, field: string): number | null {
  const r = ctx.r;
  if (r.tryNil()) return null;
  let n: number | null = null;
  try {
    n = r.tryInt();
  } catch {
    // fall through: out of range
  }
  if (n === null || n < 0) throw envelopeFailure(ctx, "expected an integer ≥ 0 or nil", field);
  return n;
}

function readEvents(ctx: Ctx): KvEvent[] {
  const n = ctx.r.tryArrayHeader();
  if (n < 0) throw envelopeFailure(ctx, "events is not an array", "events");
  const out: KvEvent[] = [];
  for (let i = 0; i < n; i++) {
    ctx.ev = i;
    const e = readEvent(ctx);
    if (e !== null) out.push(e);
  }
  ctx.ev = -1;
  return out;
}

/** Event tags, by id in TAG_TABLE. */
const STORED = 0;
const REMOVED = 1;
const CLEARED = 2;
const TAG_TABLE = new StrTable(["BlockStored", "BlockRemoved", "AllBlocksCleared"]);

/** One event, or null when it is skipped on purpose (and counted). */
function readEvent(ctx: Ctx): KvEvent | null {
  const r = ctx.r;
  const n = r.tryArrayHeader();
  if (n >= 0) return readArrayEvent(ctx, n);
  const m = r.tryMapHeader();
  if (m >= 0) return readMapEvent(ctx, m);
  throw eventFailure(ctx, `event is ${r.describeNext()}, expected an array or map`);
}

function eventFailure(ctx: Ctx, what: string, field: string | null = null): DecodeFailure {
  return new DecodeFailure(decodeError("bad_event", what, ctx.ev, field));
}

function readArrayEvent(ctx: Ctx, n: number): KvEvent | null {
  const r = ctx.r;
  if (n === 0) throw eventFailure(ctx, "empty event array");
  const tag = r.tryStrId(TAG_TABLE);
  if (tag === NOT_STR) {
    throw eventFailure(ctx, `event tag is ${r.describeNext()}, expected a string`);
  }
  const fields = n - 1;
  const s = ctx.slots;
  resetSlots(s);
  let order: readonly number[];
  switch (tag) {
    case STORED:
      if (fields < STORED_MIN_FIELDS) {
        throw eventFailure(ctx, `BlockStored has ${fields} fields, needs ${STORED_MIN_FIELDS}`);
      }
      order = ctx.order === "sglang" ? SGLANG_STORED_ORDER : VLLM_STORED_ORDER;
      break;
    case REMOVED:
      if (fields < 1) throw eventFailure(ctx, "BlockRemoved has no block_hashes");
      order = REMOVED_ORDER;
      break;
    case CLEARED:
      order = [];
      break;
    default:
      for (let i = 0; i < fields; i++) r.skip();
      ctx.skipped.unknownTag++;
      return null;
  }
  const guess = tag === STORED && ctx.order === "auto" && fields >= 8;
  for (let i = 0; i < fields; i++) {
    if (guess && i === 6) order = guessStoredOrder(r);
    const id = order[i];
    if (id === undefined) {
      r.skip();
      ctx.skipped.unknownKeys++;
    } else readField(r, id, s, ctx.ev);
  }
  return buildEvent(ctx, tag);
}

/** At field 6 of an 8+-field BlockStored: a string in field 7 means SGLang. */
function guessStoredOrder(r: MsgpackReader): readonly number[] {
  const at = r.pos;
  r.skip();
  const sglang = r.isStr();
  r.pos = at;
  return sglang ? SGLANG_STORED_ORDER : VLLM_STORED_ORDER;
}

function readMapEvent(ctx: Ctx, m: number): KvEvent | null {
  const r = ctx.r;
  const start = r.pos;
  let tag = NOT_STR;
  let remaining = m;
  // msgspec writes the tag first; any other writer may put it anywhere.
  if (m > 0 && r.tryStrId(KEY_TABLE) === KEY_TYPE) {
    tag = readTag(ctx);
    remaining = m - 1;
  } else {
    r.pos = start;
    for (let i = 0; i < m; i++) {
      if (readKey(ctx) === KEY_TYPE) tag = readTag(ctx);
      else r.skip();
    }
    r.pos = start;
  }
  if (tag === NOT_STR) throw eventFailure(ctx, 'map event has no "type"');
  let allowed: number;
  switch (tag) {
    case STORED:
      allowed = STORED_FIELDS;
      break;
    case REMOVED:
      allowed = REMOVED_FIELDS;
      break;
    case CLEARED:
      allowed = 0;
      break;
    default:
      for (let i = 0; i < 2 * remaining; i++) r.skip();
      ctx.skipped.unknownTag++;
      return null;
  }
  const s = ctx.slots;
  resetSlots(s);
  for (let i = 0; i < remaining; i++) {
    const id = readKey(ctx);
    if (id >= 0 && id !== KEY_TYPE && (allowed & (1 << id)) !== 0) readField(r, id, s, ctx.ev);
    else {
      r.skip();
      if (id !== KEY_TYPE) ctx.skipped.unknownKeys++;
    }
  }
  const required = tag === STORED ? STORED_REQUIRED : tag === REMOVED ? REMOVED_REQUIRED : 0;
  if ((s.seen & required) !== required) {
    const name = TAG_TABLE.names[tag];
    throw eventFailure(ctx, `${name} misses a required field`);
  }
  return buildEvent(ctx, tag);
}

/** A map key's id in KEY_TABLE, or STR_UNKNOWN. */
function readKey(ctx: Ctx): number {
  const id = ctx.r.tryStrId(KEY_TABLE);
  if (id === NOT_STR) throw eventFailure(ctx, `event map key is ${ctx.r.describeNext()}`);
  return id;
}

/** The tag's id in TAG_TABLE, or STR_UNKNOWN. */
function readTag(ctx: Ctx): number {
  const tag = ctx.r.tryStrId(TAG_TABLE);
  if (tag === NOT_STR) throw eventFailure(ctx, `type is ${ctx.r.describeNext()}`, "type");
  return tag;
}

/** Turn the read fields into a KvEvent, or null (counted) for a non-main KV cache group. */
function buildEvent(ctx: Ctx, tag: number): KvEvent | null {
  const s = ctx.slots;
  if (tag === CLEARED) return { type: "cleared" };
  if ((s.groupIdx !== null && s.groupIdx > 0) || !isMainSpecKind(s.specKind)) {
    ctx.skipped.nonMainGroup++;
    return null;
  }
  if (s.medium !== ctx.medium) {
    ctx.medium = s.medium;
    ctx.tier = tierOfMedium(s.medium);
  }
  if (tag === REMOVED) {
    if ((s.seen & (1 << F_BLOCK_HASHES)) === 0) throw eventFailure(ctx, "no block_hashes");
    return {
      type: "removed",
      blockHashes: s.hashes,
      medium: s.medium,
      tier: ctx.tier,
    };
  }
  return {
    type: "stored",
    blockHashes: s.hashes,
    parentHash: s.parent,
    tokenIds: s.tokens,
    blockSize: s.blockSize,
    loraId: s.loraId,
    loraName: s.loraName,
    medium: s.medium,
    tier: ctx.tier,
  };
}
