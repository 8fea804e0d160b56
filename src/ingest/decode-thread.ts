/**
 * Receiving and decoding off the main thread. Decode and index apply cost about the same
 * per block, so a worker thread that receives and decodes while the main thread applies
 * lifts ingest throughput on a machine with a free core (docs/ingestion.md).
 *
 * The worker owns the streams' SUB sockets (decode-worker.ts): handing payloads over
 * from the main thread instead cost the main thread a receive, a copy and a message per
 * batch, about as much as the decode it saved. It sends each stream's messages in
 * arrival order, in groups: the payload bytes (for the subscriber's own checks), the
 * seq frames, and per payload an event tape (the group's tapes share three transferred
 * buffers), the decoded objects when a tape cannot hold the batch, or the decode error.
 * Socket connect/disconnect events come in the same order. The main thread acknowledges
 * each group (a credit), so a slow main thread slows the worker's receiving and the SUB
 * high-water mark applies as without a thread.
 *
 * One worker per process, shared by every subscriber that asks for it (reference
 * counted: started by the first `acquire`, terminated by the last `release`, so tests
 * and the process exit). If it dies, its streams are told (`onLost`) and go on without.
 *
 * A group's six buffers (~1 MB) go back to the worker with its credit and are reused
 * for a later group (`creditBack`). Received buffers count as the main thread's external
 * memory until they are detached or collected, and V8 answers that growth with
 * mark-compact collections (pauses of a few ms, several a second under a flood);
 * handing them back detaches them, and the worker allocates none in steady state.
 */

import type { Worker } from "node:worker_threads";
import type { DecodeError, SkipCounts } from "../protocol/decode-error.js";
import type { EventTape, TapeArrays } from "../protocol/event-tape.js";
import type { EventBatch } from "../protocol/events.js";
import type { FieldOrder } from "../protocol/vllm-codec.js";
import { siblingModule, startWorkerThread } from "../worker-thread.js";

/** The decode result of one payload: a tape, or objects when a tape cannot hold it. */
export type DecodeReply =
  | { readonly ok: false; readonly error: DecodeError }
  | {
      readonly ok: true;
      readonly skipped: SkipCounts;
      readonly tape: EventTape | null;
      readonly batch: EventBatch | null;
    };

/** What the worker needs to open a stream's SUB socket. */
export interface LiveSocketOptions {
  readonly endpoint: string;
  readonly topic: string;
  readonly receiveHighWaterMark: number;
  readonly reconnectInterval: number;
  readonly reconnectMaxInterval: number;
  readonly heartbeatInterval: number;
  readonly fieldOrder: FieldOrder;
}

/** Main → worker. */
export type ThreadCommand =
  | { readonly type: "open"; readonly stream: number; readonly socket: LiveSocketOptions }
  | {
      readonly type: "credit";
      readonly stream: number;
      /** The handled group's buffers (`groupBuffers`) for reuse; empty: none. */
      readonly buffers: readonly ArrayBuffer[];
    }
  | { readonly type: "close"; readonly stream: number }
  | { readonly type: "shutdown" };

/**
 * A group of live messages of one stream, in arrival order. Message i had
 * `frameCounts[i]` frames; when 3, its seq frame is `seqBytes[seqEnds[i-1], seqEnds[i])`,
 * its payload `bytes[ends[i-1], ends[i])`, and its decode is in `meta` (`META_FIELDS`
 * numbers: a tape's first record, event count, ts, dpRank (NaN = null), skip counts;
 * first record −1 = see `others[i]`).
 */
export interface LiveGroup {
  readonly type: "live";
  readonly stream: number;
  readonly frameCounts: readonly number[];
  readonly seqBytes: Uint8Array;
  readonly seqEnds: readonly number[];
  readonly bytes: Uint8Array;
  readonly ends: readonly number[];
  readonly meta: Float64Array;
  readonly arrays: TapeArrays;
  readonly others: readonly (DecodeReply | null)[];
  /** Buffer sets this stream's worker side has allocated so far (reuse keeps it flat). */
  readonly allocated: number;
  /**
   * The buffers are the worker's own, to be handed back (`creditBack`) and reused: a
   * large group. A small one travels as exact-size copies and is not handed back.
   */
  readonly reuse: boolean;
}

/**
 * The buffers a group crosses threads in, in a fixed order: payload bytes, seq bytes,
 * meta, then the tape's records, words and tokens. Whole buffers, not exact sizes.
 */
export function groupBuffers(g: LiveGroup): ArrayBuffer[] {
  return [
    g.bytes.buffer as ArrayBuffer,
    g.seqBytes.buffer as ArrayBuffer,
    g.meta.buffer as ArrayBuffer,
    g.arrays.records.buffer as ArrayBuffer,
    g.arrays.words.buffer as ArrayBuffer,
    g.arrays.tokens.buffer as ArrayBuffer,
  ];
}

/** Worker → main. */
export type ThreadEvent =
  | LiveGroup
  | { readonly type: "event"; readonly stream: number; readonly name: "connect" | "disconnect" }
  | { readonly type: "error"; readonly stream: number; readonly message: string }
  | { readonly type: "opened"; readonly stream: number }
  | { readonly type: "closed"; readonly stream: number }
  | { readonly type: "ready" };

export const META_FIELDS = 7;

/** How long the worker gets to exit by itself before it is terminated. */
const SHUTDOWN_MS = 2000;

/** `LiveGroup.meta` of one tape. */
export function writeMeta(meta: Float64Array, i: number, tape: EventTape, skips: SkipCounts) {
  const o = i * META_FIELDS;
  meta[o] = tape.first;
  meta[o + 1] = tape.events;
  meta[o + 2] = tape.ts;
  meta[o + 3] = tape.dpRank ?? Number.NaN;
  meta[o + 4] = skips.unknownTag;
  meta[o + 5] = skips.nonMainGroup;
  meta[o + 6] = skips.unknownKeys;
}

const NO_SKIPS: SkipCounts = Object.freeze({ unknownTag: 0, nonMainGroup: 0, unknownKeys: 0 });

/** The decode of message `i` of a group (null: not decoded, decode it yourself). */
export function replyOf(g: LiveGroup, i: number): DecodeReply | null {
  const m = g.meta;
  const o = i * META_FIELDS;
  if (o >= m.length || m[o]! < 0) return g.others[i] ?? null;
  const dpRank = m[o + 3]!;
  const skipped =
    m[o + 4] === 0 && m[o + 5] === 0 && m[o + 6] === 0
      ? NO_SKIPS
      : { unknownTag: m[o + 4]!, nonMainGroup: m[o + 5]!, unknownKeys: m[o + 6]! };
  const tape: EventTape = {
    first: m[o]!,
    events: m[o + 1]!,
    ts: m[o + 2]!,
    dpRank: Number.isNaN(dpRank) ? null : dpRank,
    arrays: g.arrays,
  };
  return { ok: true, skipped, tape, batch: null };
}

/** What a stream's owner hears from the worker. */
export interface StreamHandlers {
  /** The socket is connecting (before any of its messages). */
  onOpened(): void;
  onGroup(group: LiveGroup): void;
  onEvent(name: "connect" | "disconnect"): void;
  onError(message: string): void;
  /** The worker is gone: the stream no longer receives. */
  onLost(): void;
}

/** The worker module beside this one: `.ts` under tsx/vitest, `.js` from dist/. */
const WORKER_URL = siblingModule(import.meta.url, "decode-worker");

export class DecodeThread {
  static #shared: DecodeThread | null = null;
  static #refs = 0;

  /** The process's decode thread, started on first use. Pair with `release()`. */
  static acquire(): DecodeThread {
    DecodeThread.#refs++;
    if (DecodeThread.#shared === null) DecodeThread.#shared = new DecodeThread();
    return DecodeThread.#shared;
  }

  /** Drops one reference; the last one terminates the worker. */
  static release(): Promise<void> {
    if (DecodeThread.#refs === 0) return Promise.resolve();
    if (--DecodeThread.#refs > 0 || DecodeThread.#shared === null) return Promise.resolve();
    const t = DecodeThread.#shared;
    DecodeThread.#shared = null;
    return t.#terminate();
  }

  readonly #worker: Worker;
  readonly #streams = new Map<number, StreamHandlers>();
  readonly #closing = new Map<number, () => void>();
  #nextStream = 0;
  #dead = false;
  readonly #ready: Promise<void>;
  #onReady: () => void = () => {};

  private constructor() {
    this.#ready = new Promise((resolve) => {
      this.#onReady = resolve;
    });
    this.#worker = startWorkerThread(WORKER_URL);
    this.#worker.unref();
    this.#worker.on("message", (ev: ThreadEvent) => this.#onMessage(ev));
    this.#worker.on("error", () => this.#fail());
    this.#worker.on("exit", () => this.#fail());
  }

  /** Resolves once the worker has loaded its module and can take streams. */
  ready(): Promise<void> {
    return this.#ready;
  }

  /** Opens a SUB socket on the worker; returns the stream id, or −1 if the worker is gone. */
  openStream(socket: LiveSocketOptions, handlers: StreamHandlers): number {
    if (this.#dead) return -1;
    const stream = this.#nextStream++;
    this.#streams.set(stream, handlers);
    this.#post({ type: "open", stream, socket });
    return stream;
  }

  /** The stream's owner has handled one group: the worker may send another. */
  credit(stream: number): void {
    if (!this.#dead && this.#streams.has(stream))
      this.#post({ type: "credit", stream, buffers: [] });
  }

  /**
   * `credit`, handing the group's buffers back for reuse: every view of them on this
   * thread is detached (empty) afterwards, so the owner must first copy what it keeps.
   */
  creditBack(stream: number, group: LiveGroup): void {
    if (this.#dead || !this.#streams.has(stream)) return;
    const buffers = groupBuffers(group);
    if (!group.reuse || buffers.some((b) => b.byteLength === 0)) {
      this.credit(stream); // already handed back (detached): a plain credit
      return;
    }
    this.#worker.postMessage({ type: "credit", stream, buffers } satisfies ThreadCommand, buffers);
  }

  /** Closes the stream's socket; resolves once the worker has (or is gone). */
  closeStream(stream: number): Promise<void> {
    if (this.#dead || !this.#streams.delete(stream)) return Promise.resolve();
    return new Promise((resolve) => {
      this.#closing.set(stream, resolve);
      this.#post({ type: "close", stream });
    });
  }

  #post(cmd: ThreadCommand): void {
    this.#worker.postMessage(cmd);
  }

  #onMessage(ev: ThreadEvent): void {
    if (ev.type === "ready") {
      this.#onReady();
      return;
    }
    if (ev.type === "closed") {
      this.#closing.get(ev.stream)?.();
      this.#closing.delete(ev.stream);
      return;
    }
    const h = this.#streams.get(ev.stream);
    if (h === undefined) return;
    switch (ev.type) {
      case "opened":
        h.onOpened();
        return;
      case "live":
        h.onGroup(ev);
        return;
      case "event":
        h.onEvent(ev.name);
        return;
      case "error":
        h.onError(ev.message);
        return;
      default: {
        const unknown: never = ev;
        throw new TypeError(`unknown thread event ${(unknown as { type: string }).type}`);
      }
    }
  }

  /**
   * Lets the worker close its sockets and exit by itself: terminating it with ZeroMQ
   * sockets open aborts the process (a native error during the worker's teardown).
   */
  async #terminate(): Promise<void> {
    const exited = new Promise<void>((resolve) => this.#worker.once("exit", () => resolve()));
    this.#fail();
    this.#post({ type: "shutdown" });
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<"late">((resolve) => {
      timer = setTimeout(() => resolve("late"), SHUTDOWN_MS);
    });
    if ((await Promise.race([exited, late])) === "late") await this.#worker.terminate();
    clearTimeout(timer);
  }

  #fail(): void {
    if (this.#dead) return;
    this.#dead = true;
    this.#onReady();
    for (const done of this.#closing.values()) done();
    this.#closing.clear();
    const lost = [...this.#streams.values()];
    this.#streams.clear();
    for (const h of lost) h.onLost();
  }
}
