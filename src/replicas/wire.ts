/**
 * What replicas tell each other through Redis, as compact JSON. One message per flush:
 * the sender's replica id, its message sequence number (a gap means messages were lost:
 * the receiver re-reads the sender's hash), the send time, and a list of operations on
 * the sender's in-flight requests. An empty list is a heartbeat. The same entry encoding
 * is the value of each field of the sender's Redis hash (field = request id).
 * Decoding never throws: a bad message is reported and counted by the caller.
 */

import type { WorkerKey } from "../protocol/worker.js";

/** One request routed by some replica, with absolute (wall-clock ms) deadlines. */
export interface SharedEntry {
  readonly id: string;
  readonly worker: WorkerKey;
  readonly prefillTokens: number;
  readonly blocks: number;
  readonly addedMs: number;
  /** Prefill assumed done at this time without a first-token report. */
  readonly prefillEndMs: number;
  /** Request forgotten at this time without a done report. */
  readonly expiresMs: number;
  /** Prefill not yet done. */
  readonly pending: boolean;
  /**
   * The prompt's chained block keys, two words per block (`InFlightAddInput.prefixKeys`),
   * at most `MAX_SHARED_PREFIX_BLOCKS` blocks: lets the other replicas tell which of the
   * queued prefill shares a new prompt's prefix, as the sender's own router does.
   */
  readonly prefixKeys?: Uint32Array;
}

/**
 * Blocks of prompt keys shared per request: 8 bytes each, so at most 32 KiB (~43 KiB as
 * base64) per entry; longer prompts are cut, and their queue counts as sharing only
 * the first this many blocks.
 */
export const MAX_SHARED_PREFIX_BLOCKS = 4096;

/** `e` without its prompt keys (the same object when it has none). */
export function withoutKeys(e: SharedEntry): SharedEntry {
  if (e.prefixKeys === undefined) return e;
  const { prefixKeys: _, ...rest } = e;
  return rest;
}
const MAX_KEYS_BASE64 = 4 * Math.ceil((8 * MAX_SHARED_PREFIX_BLOCKS) / 3);

export type SyncOp =
  | { readonly op: "add"; readonly entry: SharedEntry }
  | { readonly op: "first"; readonly id: string }
  | { readonly op: "done"; readonly id: string }
  /** The sender rewrote its hash (after Redis came back): re-read it. */
  | { readonly op: "reload" }
  /** The sender is leaving cleanly: forget all of its requests now. */
  | { readonly op: "leave" };

export interface SyncMessage {
  readonly replica: string;
  /** Random per process: two processes configured with one replica id are told apart. */
  readonly instance: string;
  readonly seq: number;
  readonly sentMs: number;
  readonly ops: readonly SyncOp[];
}

type EntryTuple =
  | [string, string, number, number, number, number, number, 0 | 1]
  | [string, string, number, number, number, number, number, 0 | 1, string];

function entryTuple(e: SharedEntry): EntryTuple {
  const t: EntryTuple = [
    e.id,
    e.worker,
    e.prefillTokens,
    e.blocks,
    e.addedMs,
    e.prefillEndMs,
    e.expiresMs,
    e.pending ? 1 : 0,
  ];
  if (e.pending && e.prefixKeys !== undefined && e.prefixKeys.length >= 2) {
    t.push(keysToBase64(e.prefixKeys));
  }
  return t;
}

const LITTLE_ENDIAN = new Uint8Array(Uint32Array.of(1).buffer)[0] === 1;

/** Little-endian words as base64, cut to whole blocks and `MAX_SHARED_PREFIX_BLOCKS`. */
function keysToBase64(keys: Uint32Array): string {
  const words = Math.min(keys.length - (keys.length % 2), 2 * MAX_SHARED_PREFIX_BLOCKS);
  if (LITTLE_ENDIAN) {
    return Buffer.from(keys.buffer, keys.byteOffset, 4 * words).toString("base64");
  }
  const b = Buffer.allocUnsafe(4 * words);
  for (let i = 0; i < words; i++) b.writeUInt32LE(keys[i]!, 4 * i);
  return b.toString("base64");
}

/** The inverse of `keysToBase64`; null unless it is whole blocks within the bound. */
function keysFromBase64(text: unknown): Uint32Array | null {
  if (typeof text !== "string" || text.length > MAX_KEYS_BASE64) return null;
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text)) return null;
  const b = Buffer.from(text, "base64");
  if (b.length === 0 || b.length % 8 !== 0 || b.length > 8 * MAX_SHARED_PREFIX_BLOCKS) {
    return null;
  }
  const keys = new Uint32Array(b.length / 4);
  for (let i = 0; i < keys.length; i++) keys[i] = b.readUInt32LE(4 * i);
  return keys;
}

/** The value stored in the sender's hash for one request. */
export function encodeEntry(e: SharedEntry): string {
  return JSON.stringify(entryTuple(e));
}

function entryFrom(t: unknown): SharedEntry | null {
  if (!Array.isArray(t) || (t.length !== 8 && t.length !== 9)) return null;
  const [id, worker, prefillTokens, blocks, addedMs, prefillEndMs, expiresMs, pending, keys] = t;
  if (typeof id !== "string" || typeof worker !== "string") return null;
  const nums = [prefillTokens, blocks, addedMs, prefillEndMs, expiresMs];
  if (!nums.every((n) => typeof n === "number" && Number.isFinite(n) && n >= 0)) return null;
  if (pending !== 0 && pending !== 1) return null;
  const prefixKeys = t.length === 9 ? keysFromBase64(keys) : undefined;
  if (prefixKeys === null) return null;
  return {
    id,
    worker: worker as WorkerKey,
    prefillTokens,
    blocks,
    addedMs,
    prefillEndMs,
    expiresMs,
    pending: pending === 1,
    ...(prefixKeys === undefined ? {} : { prefixKeys }),
  };
}

export function decodeEntry(text: string): SharedEntry | null {
  try {
    return entryFrom(JSON.parse(text));
  } catch {
    return null;
  }
}

function opTuple(o: SyncOp): unknown[] {
  switch (o.op) {
    case "add":
      return ["a", ...entryTuple(o.entry)];
    case "first":
      return ["f", o.id];
    case "done":
      return ["d", o.id];
    case "reload":
      return ["r"];
    case "leave":
      return ["l"];
  }
}

export function encodeMessage(m: SyncMessage): string {
  const ops = m.ops.map(opTuple);
  return JSON.stringify([m.replica, m.instance, m.seq, m.sentMs, ops]);
}

function opFrom(t: unknown): SyncOp | null {
  if (!Array.isArray(t) || t.length === 0) return null;
  switch (t[0]) {
    case "a": {
      const entry = entryFrom(t.slice(1));
      return entry === null ? null : { op: "add", entry };
    }
    case "f":
    case "d":
      if (t.length !== 2 || typeof t[1] !== "string") return null;
      return t[0] === "f" ? { op: "first", id: t[1] } : { op: "done", id: t[1] };
    case "r":
      return { op: "reload" };
    case "l":
      return { op: "leave" };
    default:
      return null;
  }
}

export function decodeMessage(text: string): SyncMessage | null {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return null;
  }
  if (!Array.isArray(v) || v.length !== 5) return null;
  const [replica, instance, seq, sentMs, rawOps] = v;
  if (typeof instance !== "string") return null;
  if (typeof replica !== "string" || replica === "") return null;
  if (!Number.isSafeInteger(seq) || typeof sentMs !== "number" || !Array.isArray(rawOps)) {
    return null;
  }
  const ops: SyncOp[] = [];
  for (const raw of rawOps) {
    const op = opFrom(raw);
    if (op === null) return null;
    ops.push(op);
  }
  return { replica, instance, seq, sentMs, ops };
}
