/**
 * Decoder for Mooncake store KV events (wire-formats §5, seed 001): `BlockStoreEvent`,
 * `BlockUpdateEvent`, `RemoveAllEvent` as positional arrays in a `[ts, events]` batch.
 *
 * Mooncake events describe a shared store (objects with replica lists), not one worker's
 * cache, so they are decoded into their own types here and turned into `KvEvent`s by the
 * stateful `MooncakeStoreAdapter`. Like the vLLM decoder it never throws, and unset
 * values (`""`, `0`, `[]`) become null/empty rather than errors.
 */

import {
  type DecodeError,
  DecodeFailure,
  decodeError,
  emptySkipCounts,
  type SkipCounts,
} from "./decode-error.js";
import type { EngineBlockHash } from "./engine-hash.js";
import { MsgpackFormatError, MsgpackReader } from "./msgpack-reader.js";

/** One copy of a stored object: `type` is `memory`, `disk` or `local_disk` (as sent). */
export interface MooncakeReplica {
  readonly type: string;
  /** Transport endpoint or file path; `""` when not sent. */
  readonly location: string;
}

export interface MooncakeBlockStore {
  readonly type: "BlockStoreEvent";
  readonly key: string;
  readonly replicas: readonly MooncakeReplica[];
  /** `""` = unset. */
  readonly modelName: string;
  /** As sent (0 = unset); the seed calls it a size in bytes, so it is informational only. */
  readonly blockSize: number;
  /** Null when sent as `""` (unset). */
  readonly blockHash: EngineBlockHash | null;
  /** Null when sent as `""`: the first block of a sequence, or unknown. */
  readonly parentHash: EngineBlockHash | null;
  readonly tokenIds: Uint32Array;
}

export interface MooncakeBlockUpdate {
  readonly type: "BlockUpdateEvent";
  readonly key: string;
  /** The complete new replica list; empty = the object is gone. */
  readonly replicas: readonly MooncakeReplica[];
}

export interface MooncakeRemoveAll {
  readonly type: "RemoveAllEvent";
}

export type MooncakeEvent = MooncakeBlockStore | MooncakeBlockUpdate | MooncakeRemoveAll;

export interface MooncakeBatch {
  /** Seconds since the epoch (an integer `ts` is Mooncake main's milliseconds). */
  readonly ts: number;
  readonly events: readonly MooncakeEvent[];
}

export type MooncakeDecodeResult =
  | { readonly ok: true; readonly batch: MooncakeBatch; readonly skipped: SkipCounts }
  | { readonly ok: false; readonly error: DecodeError };

/** Decode one Mooncake event batch payload. Never throws. */
export function decodeMooncakeBatch(payload: Uint8Array): MooncakeDecodeResult {
  const r = new MsgpackReader(payload);
  const skipped = emptySkipCounts();
  const at = { ev: -1 };
  try {
    const batch = readBatch(r, skipped, at);
    if (!r.atEnd) {
      const extra = payload.length - r.pos;
      return { ok: false, error: decodeError("not_msgpack", `${extra} trailing bytes`) };
    }
    return { ok: true, batch, skipped };
  } catch (e) {
    if (e instanceof DecodeFailure) return { ok: false, error: e.error };
    const where = at.ev >= 0 ? at.ev : null;
    const what = e instanceof MsgpackFormatError ? e.message : `unexpected: ${String(e)}`;
    return { ok: false, error: decodeError("not_msgpack", what, where) };
  }
}

function readBatch(r: MsgpackReader, skipped: SkipCounts, at: { ev: number }): MooncakeBatch {
  const n = r.tryArrayHeader();
  if (n < 2) throw bad("bad_envelope", r, "expected a [ts, events] array", null, "batch");
  const isInt = r.isInt();
  const raw = r.tryNumber();
  if (raw === null || !Number.isFinite(raw))
    throw bad("bad_envelope", r, "not a number", null, "ts");
  const ts = isInt ? raw / 1000 : raw;
  const count = r.tryArrayHeader();
  if (count < 0) throw bad("bad_envelope", r, "events is not an array", null, "events");
  const events: MooncakeEvent[] = [];
  for (let i = 0; i < count; i++) {
    at.ev = i;
    const e = readEvent(r, skipped, i);
    if (e !== null) events.push(e);
  }
  at.ev = -1;
  for (let i = 2; i < n; i++) {
    r.skip();
    skipped.unknownKeys++;
  }
  return { ts, events };
}

function readEvent(r: MsgpackReader, skipped: SkipCounts, ev: number): MooncakeEvent | null {
  const n = r.tryArrayHeader();
  if (n < 1) throw bad("bad_event", r, "expected a tagged array", ev, null);
  const tag = r.tryStr();
  if (tag === null) throw bad("bad_event", r, "tag is not a string", ev, "type");
  let known: number;
  let event: MooncakeEvent | null;
  switch (tag) {
    case "BlockStoreEvent": {
      if (n < 3) throw bad("bad_event", r, `${tag} has ${n - 1} fields, needs 2`, ev, null);
      const key = readStr(r, ev, "mooncake_key");
      const replicas = readReplicas(r, skipped, ev);
      const modelName = n > 3 ? readStr(r, ev, "model_name") : "";
      const blockSize = n > 4 ? readUint(r, ev, "block_size") : 0;
      const blockHash = n > 5 ? readHash(r, ev, "block_hash") : null;
      const parentHash = n > 6 ? readHash(r, ev, "parent_block_hash") : null;
      const tokenIds = n > 7 ? readTokens(r, ev) : new Uint32Array(0);
      event = { type: tag, key, replicas, modelName, blockSize, blockHash, parentHash, tokenIds };
      known = 8;
      break;
    }
    case "BlockUpdateEvent": {
      if (n < 3) throw bad("bad_event", r, `${tag} has ${n - 1} fields, needs 2`, ev, null);
      const key = readStr(r, ev, "mooncake_key");
      event = { type: tag, key, replicas: readReplicas(r, skipped, ev) };
      known = 3;
      break;
    }
    case "RemoveAllEvent":
      event = { type: tag };
      known = 1;
      break;
    default:
      for (let i = 1; i < n; i++) r.skip();
      skipped.unknownTag++;
      return null;
  }
  for (let i = known; i < n; i++) {
    r.skip();
    skipped.unknownKeys++;
  }
  return event;
}

function readReplicas(r: MsgpackReader, skipped: SkipCounts, ev: number): MooncakeReplica[] {
  const n = r.tryArrayHeader();
  if (n < 0) throw bad("bad_event", r, "expected an array", ev, "replicas");
  const out: MooncakeReplica[] = [];
  for (let i = 0; i < n; i++) {
    const m = r.tryArrayHeader();
    if (m < 1)
      throw bad("bad_event", r, `replicas[${i}] is not a [type, location] pair`, ev, "replicas");
    const type = readStr(r, ev, "replicas");
    const location = m > 1 ? readStr(r, ev, "replicas") : "";
    for (let j = 2; j < m; j++) {
      r.skip();
      skipped.unknownKeys++;
    }
    out.push({ type, location });
  }
  return out;
}

function readStr(r: MsgpackReader, ev: number, field: string): string {
  const s = r.tryStr();
  if (s === null) throw bad("bad_event", r, "expected a string", ev, field);
  return s;
}

function readUint(r: MsgpackReader, ev: number, field: string): number {
  const n = r.tryUint32();
  if (n < 0) throw bad("bad_event", r, "expected an integer in [0, 2^32)", ev, field);
  return n;
}

/** A hash string (decimal or 0x hex, kept as sent), `""` = unset; ints tolerated too. */
function readHash(r: MsgpackReader, ev: number, field: string): EngineBlockHash | null {
  if (r.tryNil()) return null;
  const at = r.pos;
  if (r.isStr() && r.tryStr() === "") return null;
  r.pos = at;
  const h = r.tryHash();
  if (h === null) throw bad("bad_hash", r, "expected a hash string", ev, field);
  return h;
}

function readTokens(r: MsgpackReader, ev: number): Uint32Array {
  const n = r.tryArrayHeader();
  if (n < 0) throw bad("bad_tokens", r, "expected an array", ev, "token_ids");
  const out = new Uint32Array(n);
  for (let i = 0; i < n; i++) {
    const t = r.tryUint32();
    if (t < 0) throw bad("bad_tokens", r, `token_ids[${i}] is not in [0, 2^32)`, ev, "token_ids");
    out[i] = t;
  }
  return out;
}

function bad(
  code: "bad_envelope" | "bad_event" | "bad_hash" | "bad_tokens",
  r: MsgpackReader,
  what: string,
  ev: number | null,
  field: string | null,
): DecodeFailure {
  return new DecodeFailure(decodeError(code, `${what}, got ${r.describeNext()}`, ev, field));
}
