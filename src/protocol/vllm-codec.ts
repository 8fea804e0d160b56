/**
 * Decoder for vLLM and SGLang KV event batches (wire-formats §2–§4): every envelope and
 * event variant those engines have shipped, normalised into `KvEvent`s.
 *
 * It walks the msgpack bytes once with `MsgpackReader` (no intermediate object tree, no
 * BigInt per hash) because it sits on the ingest hot path. It never throws: a malformed
 * batch is one typed `DecodeError`; what is skipped on purpose (unknown tags, events of
 * non-main KV cache groups, unknown keys) is counted, not an error.
 *
 * Long file: one decoder for every vLLM/SGLang envelope and event layout; the layouts
 * share field readers and the skip counters.
 */

import {
  type DecodeError,
  DecodeFailure,
  decodeError,
  emptySkipCounts,
  type SkipCounts,
} from "./decode-error.js";
import {
  type EventTape,
  F_BLOCK_SIZE as T_BLOCK_SIZE,
  F_COUNT as T_COUNT,
  F_LORA_ID as T_LORA_ID,
  F_LORA_NAME as T_LORA_NAME,
  F_MEDIUM as T_MEDIUM,
  F_PAIR as T_PAIR,
  F_PARENT as T_PARENT,
  F_TIER as T_TIER,
  F_TOKEN_COUNT as T_TOKEN_COUNT,
  F_TOKENS as T_TOKENS,
  TAPE_CLEARED,
  TAPE_REMOVED,
  TAPE_STORED,
  type TapeWriter,
} from "./event-tape.js";
import {
  type BlockStoredEvent,
  type EventBatch,
  type KvEvent,
  TIERS,
  type Tier,
  tierOf,
  tierOfMedium,
} from "./events.js";
import { classifyExtraKeys } from "./extra-keys.js";
import { MsgpackFormatError, MsgpackReader, NOT_STR } from "./msgpack-reader.js";
import { StrTable } from "./str-table.js";
import {
  emptySlots,
  F_BLOCK_HASHES,
  type FieldSlots,
  isMainSpecKind,
  KEY_TABLE,
  KEY_TYPE,
  NotTapeable,
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
  const ctx = newCtx(payload, options, null);
  try {
    const batch = readBatch(ctx);
    const trailing = trailingError(ctx, payload);
    if (trailing !== null) return trailing;
    return { ok: true, batch, skipped: ctx.skipped };
  } catch (e) {
    return caught(ctx, e);
  }
}

export type TapeDecodeResult =
  | { readonly ok: true; readonly tape: EventTape; readonly skipped: SkipCounts }
  | { readonly ok: false; readonly error: DecodeError };

/**
 * `decodeEventBatch` straight into an event tape of `writer`'s group (no hash strings,
 * no event objects; the tape's arrays come with `writer.finish()`). Null when a hash is
 * not an integer: decode that batch with `decodeEventBatch`. Otherwise the same result
 * (events, skip counts, errors); nothing stays on the writer from a batch that fails.
 * Never throws.
 */
export function decodeEventTape(
  payload: Uint8Array,
  writer: TapeWriter,
  options?: DecodeOptions,
): TapeDecodeResult | null {
  writer.mark();
  const ctx = newCtx(payload, options, writer);
  let trailing: { ok: false; error: DecodeError } | null;
  let batch: EventBatch;
  try {
    batch = readBatch(ctx);
    trailing = trailingError(ctx, payload);
  } catch (e) {
    writer.rollback();
    if (e instanceof NotTapeable) return null;
    return caught(ctx, e);
  }
  if (trailing !== null) {
    writer.rollback();
    return trailing;
  }
  return { ok: true, tape: writer.endTape(batch.ts, batch.dpRank), skipped: ctx.skipped };
}

function newCtx(payload: Uint8Array, options: DecodeOptions | undefined, tape: TapeWriter | null) {
  const slots = emptySlots();
  slots.tape = tape;
  const ctx: Ctx = {
    r: new MsgpackReader(payload),
    order: options?.fieldOrder ?? "auto",
    skipped: emptySkipCounts(),
    slots,
    ev: -1,
    medium: null,
    tier: "gpu",
    tape,
  };
  return ctx;
}

function trailingError(ctx: Ctx, payload: Uint8Array): { ok: false; error: DecodeError } | null {
  if (ctx.r.atEnd) return null;
  const extra = payload.length - ctx.r.pos;
  return failed(decodeError("not_msgpack", `${extra} trailing bytes after the batch`));
}

function caught(ctx: Ctx, e: unknown): { ok: false; error: DecodeError } {
  if (e instanceof DecodeFailure) return failed(e.error);
  const at = ctx.ev >= 0 ? ctx.ev : null;
  if (e instanceof MsgpackFormatError) return failed(decodeError("not_msgpack", e.message, at));
  // Anything else is a bug here, but one bad payload must still not stop ingestion.
  return failed(decodeError("not_msgpack", `unexpected: ${String(e)}`, at));
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
  /** Tape mode: events go to this writer, `readEvents` returns none. */
  readonly tape: TapeWriter | null;
}

function failed(error: DecodeError): { ok: false; error: DecodeError } {
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
    if (e !== null && ctx.tape === null) out.push(e);
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
  if (tag === CLEARED) {
    if (ctx.tape === null) return { type: "cleared" };
    ctx.tape.addEvent(TAPE_CLEARED);
    return CLEARED_EVENT;
  }
  if ((s.groupIdx !== null && s.groupIdx > 0) || !isMainSpecKind(s.specKind)) {
    ctx.skipped.nonMainGroup++;
    return null;
  }
  if (s.medium !== ctx.medium) {
    ctx.medium = s.medium;
    ctx.tier = tierOfMedium(s.medium);
  }
  if (s.locality !== null) {
    // A REMOTE copy is held at the slowest tier (events.ts `tierOf`); not cached in ctx.
    const tier = tierOf(s.medium, s.locality);
    if (tier !== ctx.tier) {
      ctx.medium = "\u0000"; // matches no medium: the next event recomputes its tier
      ctx.tier = tier;
    }
  }
  if (tag === REMOVED) {
    if ((s.seen & (1 << F_BLOCK_HASHES)) === 0) throw eventFailure(ctx, "no block_hashes");
    if (ctx.tape !== null) return tapeEvent(ctx, TAPE_REMOVED);
    return {
      type: "removed",
      blockHashes: s.hashes,
      medium: s.medium,
      tier: ctx.tier,
    };
  }
  if (ctx.tape !== null) return tapeEvent(ctx, TAPE_STORED);
  const extra =
    s.extraKeys === null
      ? null
      : classifyExtraKeys(s.extraKeys, s.loraName, s.loraId, s.parent === null);
  const cacheSalt = s.cacheSalt ?? extra?.salt ?? null;
  const event: BlockStoredEvent = {
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
  if (cacheSalt === null && (extra === null || extra.opaqueFrom === null)) return event;
  return { ...event, cacheSalt, opaqueFrom: extra?.opaqueFrom ?? null };
}

const CLEARED_EVENT: KvEvent = Object.freeze({ type: "cleared" });

/** Tape mode: writes the event just read; returns a placeholder (`readEvents` drops it). */
function tapeEvent(ctx: Ctx, kind: number): KvEvent {
  const t = ctx.tape!;
  const s = ctx.slots;
  const o = t.addEvent(kind);
  const r = t.records;
  r[o + T_TIER] = TIERS.indexOf(ctx.tier);
  r[o + T_MEDIUM] = t.stringIndex(s.medium);
  r[o + T_PAIR] = s.hashPair;
  r[o + T_COUNT] = s.hashCount;
  if (kind === TAPE_STORED) {
    r[o + T_PARENT] = s.parentPair;
    if (s.tokenLen > 0) {
      r[o + T_TOKENS] = s.tokenPos;
      r[o + T_TOKEN_COUNT] = s.tokenLen;
      t.tokenCount = s.tokenPos + s.tokenLen;
    }
    r[o + T_BLOCK_SIZE] = s.blockSize;
    if (s.loraId !== null) r[o + T_LORA_ID] = s.loraId;
    r[o + T_LORA_NAME] = t.stringIndex(s.loraName);
  }
  return CLEARED_EVENT;
}
