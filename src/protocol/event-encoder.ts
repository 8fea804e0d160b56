/**
 * The engine side of the KV event wire: encodes batches exactly as vLLM or SGLang would
 * (msgspec rules: float64 `ts`, smallest int widths, uint64 only for values ≥ 2^63,
 * trailing default fields omitted in array form, default fields omitted in map form).
 *
 * Used by the codec tests, the engine-impersonating publisher and the simulated vLLM
 * worker, so every wire variant the decoder accepts can be produced on purpose. Hashes
 * are given raw (`bigint` for 64-bit ints, `Uint8Array` for digests) and written in the
 * form the options ask for.
 */

import { MsgpackWriter } from "./msgpack-writer.js";

/** A block hash as an engine holds it: a 64-bit int (any sign) or a digest. */
export type WireHash = bigint | Uint8Array;

/** Any msgpack value the encoder can write (for extra keys, custom events, unknown keys). */
export type WireValue =
  | string
  | number
  | bigint
  | boolean
  | null
  | Uint8Array
  | readonly WireValue[]
  | { readonly [key: string]: WireValue };

/** Additional (unknown to the router) fields, appended after the known ones. */
export type WireExtraFields = readonly (readonly [string, WireValue])[];

export interface WireBlockStored {
  readonly type: "BlockStored";
  readonly blockHashes: readonly WireHash[];
  readonly parentHash: WireHash | null;
  readonly tokenIds: ArrayLike<number>;
  readonly blockSize: number;
  readonly loraId: number | null;
  readonly medium: string | null;
  /** vLLM only (SGLang has no such field). */
  readonly loraName: string | null;
  /** vLLM only: one entry per block, each a tuple or nil. */
  readonly extraKeys?: readonly (readonly WireValue[] | null)[] | null;
  readonly groupIdx?: number | null;
  /** vLLM's `KVCacheSpecKind` value, e.g. `"full_attention"`, `"sliding_window"`. */
  readonly kvCacheSpecKind?: string | null;
  readonly kvCacheSpecSlidingWindow?: number | null;
  readonly locality?: string | null;
  readonly ownership?: string | null;
  readonly sessionId?: string | null;
  /** SGLang only. */
  readonly cacheSalt?: string | null;
  readonly extraFields?: WireExtraFields;
}

export interface WireBlockRemoved {
  readonly type: "BlockRemoved";
  readonly blockHashes: readonly WireHash[];
  readonly medium: string | null;
  /** vLLM only. */
  readonly groupIdx?: number | null;
  readonly locality?: string | null;
  readonly ownership?: string | null;
  readonly extraFields?: WireExtraFields;
}

export interface WireAllBlocksCleared {
  readonly type: "AllBlocksCleared";
  readonly extraFields?: WireExtraFields;
}

/** An event type the router does not know (e.g. a future `BlockInactive`), for tests. */
export interface WireCustomEvent {
  readonly type: "custom";
  readonly tag: string;
  readonly fields: WireExtraFields;
}

export type WireEvent = WireBlockStored | WireBlockRemoved | WireAllBlocksCleared | WireCustomEvent;

export interface WireBatch {
  /** Seconds since the epoch; always written as float64. */
  readonly ts: number;
  readonly events: readonly WireEvent[];
  readonly dpRank: number | null;
}

export interface EncodeOptions {
  /** `map`: vLLM ≥ ~0.24, SGLang after Sep 2026; `array`: older (tagged arrays). */
  readonly eventForm: "array" | "map";
  readonly envelopeForm: "array" | "map";
  /**
   * `uint64`: vLLM ≥ 0.10.2; `int64`: the same 64 bits as signed (SGLang, old vLLM);
   * `binary`: digests as msgpack bin (a bigint is expanded to `digestBytes` bytes).
   */
  readonly hashForm: "uint64" | "int64" | "binary";
  /** Write the dp rank (nil when `dpRank` is null); false leaves it out entirely. */
  readonly includeDpRank: boolean;
  /** Field order and required fields of `BlockStored`/`BlockRemoved`. */
  readonly engine: "vllm" | "sglang";
  /** Length of digests derived from bigint hashes with `hashForm: "binary"`. */
  readonly digestBytes: 16 | 32;
}

export const DEFAULT_ENCODE_OPTIONS: EncodeOptions = Object.freeze({
  eventForm: "map",
  envelopeForm: "array",
  hashForm: "uint64",
  includeDpRank: true,
  engine: "vllm",
  digestBytes: 32,
});

/** Encode one batch as the payload frame of a KV event message. */
export function encodeEventBatch(batch: WireBatch, options?: Partial<EncodeOptions>): Uint8Array {
  const o: EncodeOptions = { ...DEFAULT_ENCODE_OPTIONS, ...options };
  const w = new MsgpackWriter();
  const rankKey = o.engine === "sglang" ? "attn_dp_rank" : "data_parallel_rank";
  if (o.envelopeForm === "array") {
    w.arrayHeader(o.includeDpRank ? 3 : 2);
    w.float64(batch.ts);
    writeEvents(w, batch.events, o);
    if (o.includeDpRank) writeOptInt(w, batch.dpRank);
  } else {
    w.mapHeader(o.includeDpRank ? 3 : 2);
    w.str("ts");
    w.float64(batch.ts);
    w.str("events");
    writeEvents(w, batch.events, o);
    if (o.includeDpRank) {
      w.str(rankKey);
      writeOptInt(w, batch.dpRank);
    }
  }
  return w.finish();
}

/** One field: its wire name, whether it must be written, and its writer (null = default). */
type Field = readonly [name: string, required: boolean, write: ((w: MsgpackWriter) => void) | null];

function writeEvents(w: MsgpackWriter, events: readonly WireEvent[], o: EncodeOptions): void {
  w.arrayHeader(events.length);
  for (const e of events) {
    const [tag, fields, extra] = eventFields(e, o);
    if (o.eventForm === "array") writeArrayEvent(w, tag, fields, extra);
    else writeMapEvent(w, tag, fields, extra);
  }
}

function writeArrayEvent(w: MsgpackWriter, tag: string, fields: Field[], extra: WireExtraFields) {
  // msgspec drops trailing fields that hold their default; unknown extras force all out.
  let n = fields.length;
  if (extra.length === 0) while (n > 0 && !fields[n - 1]![1] && fields[n - 1]![2] === null) n--;
  w.arrayHeader(1 + n + extra.length);
  w.str(tag);
  for (let i = 0; i < n; i++) {
    const write = fields[i]![2];
    if (write === null) w.nil();
    else write(w);
  }
  for (const [, v] of extra) writeValue(w, v);
}

function writeMapEvent(w: MsgpackWriter, tag: string, fields: Field[], extra: WireExtraFields) {
  const present = fields.filter(([, required, write]) => required || write !== null);
  w.mapHeader(1 + present.length + extra.length);
  w.str("type");
  w.str(tag);
  for (const [name, , write] of present) {
    w.str(name);
    if (write === null) w.nil();
    else write(w);
  }
  for (const [k, v] of extra) {
    w.str(k);
    writeValue(w, v);
  }
}

function eventFields(e: WireEvent, o: EncodeOptions): [string, Field[], WireExtraFields] {
  const vllm = o.engine === "vllm";
  switch (e.type) {
    case "BlockStored": {
      const common: Field[] = [
        ["block_hashes", true, (w) => writeHashes(w, e.blockHashes, o)],
        [
          "parent_block_hash",
          true,
          e.parentHash === null ? null : (w) => writeHash(w, e.parentHash!, o),
        ],
        ["token_ids", true, (w) => writeInts(w, e.tokenIds)],
        ["block_size", true, (w) => w.int(e.blockSize)],
        ["lora_id", true, optInt(e.loraId)],
        ["medium", vllm, optStr(e.medium)],
      ];
      const rest: Field[] = vllm
        ? [
            ["lora_name", true, optStr(e.loraName)],
            ["extra_keys", false, optValue(e.extraKeys)],
            ["group_idx", false, optInt(e.groupIdx)],
            ["kv_cache_spec_kind", false, optStr(e.kvCacheSpecKind)],
            ["kv_cache_spec_sliding_window", false, optInt(e.kvCacheSpecSlidingWindow)],
            ["locality", false, optStr(e.locality)],
            ["ownership", false, optStr(e.ownership)],
            ["session_id", false, optStr(e.sessionId)],
          ]
        : [
            ["cache_salt", false, optStr(e.cacheSalt)],
            ["session_id", false, optStr(e.sessionId)],
          ];
      return ["BlockStored", [...common, ...rest], e.extraFields ?? []];
    }
    case "BlockRemoved": {
      const fields: Field[] = [
        ["block_hashes", true, (w) => writeHashes(w, e.blockHashes, o)],
        ["medium", vllm, optStr(e.medium)],
      ];
      if (vllm) {
        fields.push(
          ["group_idx", false, optInt(e.groupIdx)],
          ["locality", false, optStr(e.locality)],
          ["ownership", false, optStr(e.ownership)],
        );
      }
      return ["BlockRemoved", fields, e.extraFields ?? []];
    }
    case "AllBlocksCleared":
      return ["AllBlocksCleared", [], e.extraFields ?? []];
    case "custom":
      return [e.tag, [], e.fields];
  }
}

const optInt = (v: number | null | undefined) =>
  v === null || v === undefined ? null : (w: MsgpackWriter) => w.int(v);
const optStr = (v: string | null | undefined) =>
  v === null || v === undefined ? null : (w: MsgpackWriter) => w.str(v);
const optValue = (v: WireValue | undefined) =>
  v === null || v === undefined ? null : (w: MsgpackWriter) => writeValue(w, v);

function writeOptInt(w: MsgpackWriter, v: number | null): void {
  if (v === null) w.nil();
  else w.int(v);
}

function writeInts(w: MsgpackWriter, values: ArrayLike<number>): void {
  w.arrayHeader(values.length);
  for (let i = 0; i < values.length; i++) w.int(values[i]!);
}

function writeHashes(w: MsgpackWriter, hashes: readonly WireHash[], o: EncodeOptions): void {
  w.arrayHeader(hashes.length);
  for (const h of hashes) writeHash(w, h, o);
}

/** Write one hash in the requested form, converting between ints and digests as vLLM does. */
export function writeHash(
  w: MsgpackWriter,
  h: WireHash,
  o: Pick<EncodeOptions, "hashForm" | "digestBytes">,
): void {
  switch (o.hashForm) {
    case "uint64":
      w.bigint(BigInt.asUintN(64, toBigInt(h)));
      return;
    case "int64":
      w.bigint(BigInt.asIntN(64, toBigInt(h)));
      return;
    case "binary":
      w.bin(typeof h === "bigint" ? digestOf(h, o.digestBytes) : h);
      return;
  }
}

/** vLLM's int form of a digest: its last 8 bytes, big-endian. */
function toBigInt(h: WireHash): bigint {
  if (typeof h === "bigint") return h;
  let v = 0n;
  for (let i = Math.max(0, h.length - 8); i < h.length; i++) v = (v << 8n) | BigInt(h[i]!);
  return v;
}

/**
 * A deterministic digest for a 64-bit value: the value's 8 bytes last (so the int form
 * of the digest is the value again), the rest a fixed mix of them.
 */
export function digestOf(value: bigint, length: 16 | 32): Uint8Array {
  const out = new Uint8Array(length);
  const u = BigInt.asUintN(64, value);
  for (let i = 0; i < 8; i++) out[length - 8 + i] = Number((u >> BigInt(56 - 8 * i)) & 0xffn);
  for (let i = 0; i < length - 8; i++)
    out[i] = (out[length - 8 + (i % 8)]! ^ (0x5a + 31 * i)) & 0xff;
  return out;
}

/** Any value, msgspec style (a non-integral number is a float64). */
export function writeValue(w: MsgpackWriter, v: WireValue): void {
  if (v === null) w.nil();
  else if (typeof v === "string") w.str(v);
  else if (typeof v === "boolean") w.bool(v);
  else if (typeof v === "bigint") w.bigint(v);
  else if (typeof v === "number") {
    if (Number.isSafeInteger(v)) w.int(v);
    else w.float64(v);
  } else if (v instanceof Uint8Array) w.bin(v);
  else if (Array.isArray(v)) {
    w.arrayHeader(v.length);
    for (const x of v as readonly WireValue[]) writeValue(w, x);
  } else {
    const entries = Object.entries(v as { readonly [key: string]: WireValue });
    w.mapHeader(entries.length);
    for (const [k, x] of entries) {
      w.str(k);
      writeValue(w, x);
    }
  }
}
