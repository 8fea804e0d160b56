/**
 * The index snapshot's file format: the prefix index and, per engine stream, the last
 * applied seq and the bytes of that batch (what recognises the engine's stream on
 * restart). Pure: bytes in, bytes out; the service writes and reads the file
 * (service/snapshot-store.ts, docs/index.md "Warm restart").
 *
 * Taking one (`captureSnapshot`) copies the tree's typed arrays (one memcpy each) between
 * two events, so the seqs and the index agree; `encodeSnapshot` then yields the file in
 * chunks of bounded work, to be written across event-loop turns. The format is logical
 * (keys, parents, entries), not the tree's memory layout:
 *
 *   "KVRSNAP\n" · u32 version · u32 n · n bytes of JSON header (blockSize, workers, streams)
 *   sections: u8 tag · u32 count · u32 bytes · payload   (little-endian u32 words)
 *     1 nodes    count × [key hi, key lo, parent + 1]   (parents come first; 0 = a root)
 *     2 strings  count × [u32 length, UTF-8]            (interned hashes, numbered in order)
 *     3 entries  count × [worker, kind << 3 | tiers, hash hi, hash lo, node]  (LRU order)
 *     4 copies   count × [entry, tier bit, extra copies]
 *     0 end      count 0, 4 bytes: CRC-32 of every byte before them
 *
 * `decodeSnapshot` checks all of it (magic, version, checksum, block size, every index)
 * before anything is restored, so a bad file is refused whole, never half-loaded.
 *
 * Long file: the encoder, the checking decoder and the restore of one format are read
 * and changed together (a field added on one side must be checked and used on the other).
 */

import type { WorkerKey } from "../protocol/worker.js";
import { crc32 } from "../util/crc32.js";
import { ENTRY_LAYOUT as E } from "./engine-hash-table.js";
import { NODE_LAYOUT as N } from "./node-store.js";
import type { IndexCapture, SnapshotAccess } from "./snapshot-access.js";

export const SNAPSHOT_VERSION = 1;
const MAGIC = new TextEncoder().encode("KVRSNAP\n");
const FREE = 0xffffffff;
const TAG_END = 0;
const TAG_NODES = 1;
const TAG_STRINGS = 2;
const TAG_ENTRIES = 3;
const TAG_COPIES = 4;
/** Records per section chunk: a few milliseconds of encoding. */
const CHUNK_RECORDS = 4096;

/** One engine stream as saved: its last applied batch. */
export interface SavedStream {
  readonly worker: WorkerKey;
  readonly lastSeq: bigint;
  /** The bytes of batch `lastSeq`, compared with the engine's copy on restart. */
  readonly lastBatch: Uint8Array;
}

export interface SnapshotCapture {
  readonly index: IndexCapture;
  readonly streams: readonly SavedStream[];
  readonly createdAtMs: number;
}

/** Takes a snapshot now (synchronous, copies; cheap: no per-block work). */
export function captureSnapshot(
  access: SnapshotAccess,
  streams: readonly SavedStream[],
  createdAtMs: number,
): SnapshotCapture {
  return {
    index: access.capture(),
    streams: streams.map((s) => ({ ...s, lastBatch: s.lastBatch.slice() })),
    createdAtMs,
  };
}

/**
 * The file, in chunks; each costs at most a few milliseconds to produce. With `reuse`, a
 * chunk's bytes are valid only until the next is asked for (write it first): sections
 * are built in a few recycled buffers instead of ~30 MB of fresh ones per write, whose
 * external-memory pressure set off major GCs in the middle of a write. With `sliceOver`
 * (polled every 64 records), a chunk also ends as soon as it says the time slice is
 * spent: a record count alone does not bound the first write of a process, whose
 * encoder runs unoptimised until V8 has compiled it (one 4,096-record chunk of a first
 * write took 40 ms of CPU, later ones 4–12 ms). Chunk boundaries then
 * depend on timing; the decoded content does not.
 */
export function* encodeSnapshot(
  cap: SnapshotCapture,
  options: { readonly reuse?: boolean; readonly sliceOver?: () => boolean } = {},
): Generator<Uint8Array> {
  const over = options.sliceOver ?? (() => false);
  if (options.reuse !== true) {
    yield* encodeChunks(cap, (n) => new Uint8Array(n), over);
    return;
  }
  const free: ArrayBuffer[] = [];
  const alloc = (n: number): Uint8Array => {
    const i = free.findIndex((b) => b.byteLength >= n);
    const b = i >= 0 ? free.splice(i, 1)[0]! : new ArrayBuffer(Math.max(n, 1 << 17));
    return new Uint8Array(b, 0, n);
  };
  for (const chunk of encodeChunks(cap, alloc, over)) {
    yield chunk;
    if (chunk.buffer.byteLength >= 1 << 17 && free.length < 8)
      free.push(chunk.buffer as ArrayBuffer);
  }
}

function* encodeChunks(
  cap: SnapshotCapture,
  alloc: (bytes: number) => Uint8Array,
  over: () => boolean,
): Generator<Uint8Array> {
  const ix = cap.index;
  const slots: number[] = []; // slot → worker number in the file, −1 = not saved
  const workers: string[] = [];
  for (const key of ix.workers) {
    slots.push(key === undefined ? -1 : workers.length);
    if (key !== undefined) workers.push(key);
  }
  const header = new TextEncoder().encode(
    JSON.stringify({
      blockSize: ix.blockSize,
      createdAtMs: cap.createdAtMs,
      workers,
      streams: cap.streams.map((s) => ({
        worker: s.worker,
        lastSeq: s.lastSeq.toString(),
        lastBatch: Buffer.from(s.lastBatch).toString("base64"),
      })),
    }),
  );
  let crc = 0;
  const out = (bytes: Uint8Array): Uint8Array => {
    crc = crc32(bytes, crc);
    return bytes;
  };
  const head = new Uint8Array(16 + header.length);
  head.set(MAGIC, 0);
  const hv = new DataView(head.buffer);
  hv.setUint32(8, SNAPSHOT_VERSION, true);
  hv.setUint32(12, header.length, true);
  head.set(header, 16);
  yield out(head);

  const ents = ix.entries;
  const nodes = ix.nodes;
  const maxSteps = ents.length / E.stride;
  /** The saved entry after `e` in LRU order (−1 at the end): live, of a saved worker. */
  const next = (e: number, steps: { n: number }): number => {
    for (e = e < 0 ? ix.oldest : ents[e * E.stride + E.newer]! - 1; e >= 0; ) {
      if (++steps.n > maxSteps) return -1; // defensive: a chain never loops
      const meta = ents[e * E.stride + E.meta]!;
      if (meta !== FREE && (slots[meta >>> 4] ?? -1) >= 0) return e;
      e = ents[e * E.stride + E.newer]! - 1;
    }
    return -1;
  };

  // Nodes: every node a saved entry points at, ancestors first.
  const number = new Int32Array(nodes.length / N.stride); // node → file number + 1
  let count = 0;
  let buf = new Uint32Array(CHUNK_RECORDS * 3);
  let fill = 0;
  const ready: Uint8Array[] = [];
  const stack: number[] = [];
  let steps = { n: 0 };
  let polls = 0;
  for (let e = next(-1, steps); e >= 0; e = next(e, steps)) {
    let n = ents[e * E.stride + E.node]!;
    while (n >= 0 && number[n] === 0) {
      stack.push(n);
      n = nodes[n * N.stride + N.parent]! - 1;
    }
    while (stack.length > 0) {
      const m = stack.pop()!;
      const p = nodes[m * N.stride + N.parent]! - 1;
      buf[fill++] = nodes[m * N.stride + N.keyHi]!;
      buf[fill++] = nodes[m * N.stride + N.keyLo]!;
      buf[fill++] = p < 0 ? 0 : number[p]!;
      number[m] = ++count;
      if (fill === buf.length) {
        ready.push(section(alloc, TAG_NODES, fill / 3, buf));
        fill = 0;
      }
    }
    if ((++polls & 63) === 0 && ready.length === 0 && over()) {
      // The slice is spent: end the section here (or yield nothing, to give the turn back).
      ready.push(fill > 0 ? section(alloc, TAG_NODES, fill / 3, buf.subarray(0, fill)) : EMPTY);
      fill = 0;
    }
    while (ready.length > 0) yield out(ready.shift()!);
  }
  if (fill > 0) yield out(section(alloc, TAG_NODES, fill / 3, buf.subarray(0, fill)));

  // Entries, with the interned strings they use just before them.
  const stringNo = new Map<number, number>();
  const strings: string[] = [];
  const copies: number[] = [];
  let ordinal = 0;
  buf = new Uint32Array(CHUNK_RECORDS * 5);
  fill = 0;
  const flush = function* (): Generator<Uint8Array> {
    if (strings.length > 0) {
      const parts = strings.map((s) => new TextEncoder().encode(s));
      const bytes = new Uint8Array(parts.reduce((a, p) => a + 4 + p.length, 0));
      const dv = new DataView(bytes.buffer);
      let at = 0;
      for (const p of parts) {
        dv.setUint32(at, p.length, true);
        bytes.set(p, at + 4);
        at += 4 + p.length;
      }
      yield out(sectionBytes(alloc, TAG_STRINGS, parts.length, bytes));
      strings.length = 0;
    }
    if (fill > 0) yield out(section(alloc, TAG_ENTRIES, fill / 5, buf.subarray(0, fill)));
    fill = 0;
  };
  steps = { n: 0 };
  for (let e = next(-1, steps); e >= 0; e = next(e, steps)) {
    const r = e * E.stride;
    const meta = ents[r + E.meta]!;
    const kind = (meta >>> 3) & 1;
    let lo = ents[r + E.lo]!;
    if (kind === 1) {
      let no = stringNo.get(lo);
      if (no === undefined) {
        no = stringNo.size;
        stringNo.set(lo, no);
        strings.push(ix.strings(lo) ?? "");
      }
      lo = no;
    }
    buf[fill++] = slots[meta >>> 4]!;
    buf[fill++] = meta & 15;
    buf[fill++] = ents[r + E.hi]!;
    buf[fill++] = lo;
    buf[fill++] = number[ents[r + E.node]!]! - 1;
    if (ix.copies.size > 0) {
      for (const bit of [1, 2, 4]) {
        const n = ix.copies.get(e * 8 + bit);
        if (n !== undefined) copies.push(ordinal, bit, n);
      }
    }
    ordinal++;
    if (fill === buf.length || ((ordinal & 63) === 0 && over())) yield* flush();
  }
  yield* flush();
  if (copies.length > 0)
    yield out(section(alloc, TAG_COPIES, copies.length / 3, Uint32Array.from(copies)));
  const end = new Uint8Array(13);
  end[0] = TAG_END;
  new DataView(end.buffer).setUint32(5, 4, true);
  crc = crc32(end.subarray(0, 9), crc);
  new DataView(end.buffer).setUint32(9, crc, true);
  yield end;
}

type Alloc = (bytes: number) => Uint8Array;

function section(alloc: Alloc, tag: number, count: number, words: Uint32Array): Uint8Array {
  const bytes = new Uint8Array(words.buffer, words.byteOffset, words.byteLength);
  if (!littleEndian) throw new Error("snapshots need a little-endian host");
  return sectionBytes(alloc, tag, count, bytes);
}

function sectionBytes(alloc: Alloc, tag: number, count: number, payload: Uint8Array): Uint8Array {
  const out = alloc(9 + payload.length);
  out[0] = tag;
  const dv = new DataView(out.buffer, out.byteOffset, out.byteLength);
  dv.setUint32(1, count, true);
  dv.setUint32(5, payload.length, true);
  out.set(payload, 9);
  return out;
}

const EMPTY = new Uint8Array(0);

const littleEndian = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/** Why a snapshot was refused (stable codes, for the log line and tests). */
export type SnapshotRefusal =
  | "truncated"
  | "not_a_snapshot"
  | "version"
  | "checksum"
  | "block_size"
  | "malformed";

export interface DecodedSnapshot {
  readonly blockSize: number;
  readonly createdAtMs: number;
  readonly workers: readonly WorkerKey[];
  readonly streams: readonly SavedStream[];
  /** 3 words per node: hi, lo, parent + 1. */
  readonly nodes: Uint32Array;
  /** 5 words per entry: worker, kind << 3 | tiers, hi, lo, node. */
  readonly entries: Uint32Array;
  readonly strings: readonly string[];
  /** Per entry ordinal with copies: extra copies per tier (gpu, host, disk). */
  readonly copies: ReadonlyMap<number, number[]>;
}

export type DecodeSnapshotResult =
  | { readonly ok: true; readonly snapshot: DecodedSnapshot }
  | { readonly ok: false; readonly reason: SnapshotRefusal; readonly message: string };

const refuse = (reason: SnapshotRefusal, message: string): DecodeSnapshotResult => ({
  ok: false,
  reason,
  message,
});

/** Checks and parses a whole snapshot file; never throws. */
export function decodeSnapshot(bytes: Uint8Array, blockSize: number): DecodeSnapshotResult {
  try {
    return decode(bytes, blockSize);
  } catch (err) {
    return refuse("malformed", `unreadable snapshot: ${String(err)}`);
  }
}

function decode(bytes: Uint8Array, blockSize: number): DecodeSnapshotResult {
  if (bytes.length < 16 + 13) return refuse("truncated", `only ${bytes.length} bytes`);
  for (let i = 0; i < MAGIC.length; i++) {
    if (bytes[i] !== MAGIC[i]) return refuse("not_a_snapshot", "no kvrouter snapshot header");
  }
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const version = dv.getUint32(8, true);
  if (version !== SNAPSHOT_VERSION) {
    return refuse("version", `format version ${version}, this kvrouter reads ${SNAPSHOT_VERSION}`);
  }
  const tail = bytes.length - 13;
  if (bytes[tail] !== TAG_END || dv.getUint32(tail + 5, true) !== 4) {
    return refuse("truncated", "no end marker (the file was cut short)");
  }
  const want = dv.getUint32(tail + 9, true);
  const got = crc32(bytes.subarray(0, tail + 9));
  if (want !== got) return refuse("checksum", `checksum ${got} differs from the saved ${want}`);
  const hlen = dv.getUint32(12, true);
  if (16 + hlen > tail) return refuse("malformed", "header longer than the file");
  const h = JSON.parse(new TextDecoder().decode(bytes.subarray(16, 16 + hlen))) as {
    blockSize: number;
    createdAtMs: number;
    workers: string[];
    streams: { worker: string; lastSeq: string; lastBatch: string }[];
  };
  if (h.blockSize !== blockSize) {
    return refuse(
      "block_size",
      `taken with index.blockSize ${h.blockSize}, configured ${blockSize}`,
    );
  }
  if (
    !Array.isArray(h.workers) ||
    !h.workers.every((w) => typeof w === "string" && w.includes("#"))
  ) {
    return refuse("malformed", "bad worker list");
  }
  const streams: SavedStream[] = [];
  for (const s of h.streams ?? []) {
    if (
      typeof s.worker !== "string" ||
      !/^\d+$/.test(s.lastSeq) ||
      typeof s.lastBatch !== "string"
    ) {
      return refuse("malformed", "bad stream record");
    }
    const lastBatch = new Uint8Array(Buffer.from(s.lastBatch, "base64"));
    streams.push({ worker: s.worker as WorkerKey, lastSeq: BigInt(s.lastSeq), lastBatch });
  }
  const nodeParts: Uint32Array[] = [];
  const entryParts: Uint32Array[] = [];
  const strings: string[] = [];
  const copies = new Map<number, number[]>();
  let nodeCount = 0;
  let entryCount = 0;
  let at = 16 + hlen;
  while (at < tail) {
    if (at + 9 > tail) return refuse("malformed", "section header past the end");
    const tag = bytes[at]!;
    const count = dv.getUint32(at + 1, true);
    const len = dv.getUint32(at + 5, true);
    const start = at + 9;
    if (start + len > tail) return refuse("malformed", "section past the end");
    const words = (k: number): Uint32Array | null => {
      if (len !== count * k * 4) return null;
      const copy = new Uint8Array(bytes.subarray(start, start + len)); // aligned
      return new Uint32Array(copy.buffer);
    };
    if (tag === TAG_NODES) {
      const w = words(3);
      if (w === null) return refuse("malformed", "nodes section size");
      for (let i = 0; i < count; i++) {
        if (w[3 * i + 2]! > nodeCount + i) return refuse("malformed", "a node before its parent");
      }
      nodeParts.push(w);
      nodeCount += count;
    } else if (tag === TAG_STRINGS) {
      let p = start;
      for (let i = 0; i < count; i++) {
        if (p + 4 > start + len) return refuse("malformed", "strings section size");
        const n = dv.getUint32(p, true);
        if (p + 4 + n > start + len) return refuse("malformed", "strings section size");
        strings.push(new TextDecoder().decode(bytes.subarray(p + 4, p + 4 + n)));
        p += 4 + n;
      }
    } else if (tag === TAG_ENTRIES) {
      const w = words(5);
      if (w === null) return refuse("malformed", "entries section size");
      for (let i = 0; i < count; i++) {
        const kindMask = w[5 * i + 1]!;
        const ok =
          w[5 * i]! < h.workers.length &&
          (kindMask & 7) !== 0 &&
          kindMask < 16 &&
          w[5 * i + 4]! < nodeCount &&
          ((kindMask & 8) === 0 || w[5 * i + 3]! < strings.length);
        if (!ok) return refuse("malformed", `entry ${entryCount + i} out of range`);
      }
      entryParts.push(w);
      entryCount += count;
    } else if (tag === TAG_COPIES) {
      const w = words(3);
      if (w === null) return refuse("malformed", "copies section size");
      for (let i = 0; i < count; i++) {
        const [e, bit, n] = [w[3 * i]!, w[3 * i + 1]!, w[3 * i + 2]!];
        if (e >= entryCount || (bit !== 1 && bit !== 2 && bit !== 4)) {
          return refuse("malformed", "copy out of range");
        }
        const c = copies.get(e) ?? [0, 0, 0];
        c[31 - Math.clz32(bit)] = n;
        copies.set(e, c);
      }
    } else {
      return refuse("malformed", `unknown section ${tag}`);
    }
    at = start + len;
  }
  return {
    ok: true,
    snapshot: {
      blockSize: h.blockSize,
      createdAtMs: h.createdAtMs,
      workers: h.workers as WorkerKey[],
      streams,
      nodes: concat(nodeParts, nodeCount * 3),
      entries: concat(entryParts, entryCount * 5),
      strings,
      copies,
    },
  };
}

function concat(parts: Uint32Array[], n: number): Uint32Array {
  const out = new Uint32Array(n);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/**
 * Rebuilds a checked snapshot into an empty index (`access` of a fresh tree). Only
 * `keep` workers' entries are restored. Returns the blocks restored per worker.
 */
export function restoreSnapshot(
  access: SnapshotAccess,
  snap: DecodedSnapshot,
  keep: (worker: WorkerKey) => boolean = () => true,
): Map<WorkerKey, number> {
  const nodes = snap.nodes;
  // Nodes are made when an entry needs them (with their ancestors): a node only other,
  // unkept workers held would be left without holders.
  const ids = new Int32Array(nodes.length / 3).fill(-1);
  const stack: number[] = [];
  const nodeOf = (i: number): number => {
    for (let j = i; j >= 0 && ids[j]! < 0; j = nodes[3 * j + 2]! - 1) stack.push(j);
    while (stack.length > 0) {
      const j = stack.pop()!;
      const p = nodes[3 * j + 2]!;
      ids[j] = access.restoreNode(nodes[3 * j]!, nodes[3 * j + 1]!, p === 0 ? -1 : ids[p - 1]!);
    }
    return ids[i]!;
  };
  const kept = snap.workers.map((w) => keep(w));
  const counts = new Map<WorkerKey, number>();
  const ents = snap.entries;
  for (let i = 0; i < ents.length / 5; i++) {
    const w = ents[5 * i]!;
    if (!kept[w]) continue;
    const worker = snap.workers[w]!;
    const kindMask = ents[5 * i + 1]!;
    const str = (kindMask & 8) === 0 ? null : snap.strings[ents[5 * i + 3]!]!;
    const node = nodeOf(ents[5 * i + 4]!);
    access.restoreEntry(
      worker,
      node,
      kindMask & 7,
      ents[5 * i + 2]!,
      ents[5 * i + 3]!,
      str,
      snap.copies.get(i) ?? null,
    );
    counts.set(worker, (counts.get(worker) ?? 0) + 1);
  }
  return counts;
}
