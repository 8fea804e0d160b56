/**
 * The decode thread's entry point (see decode-thread.ts): one SUB socket per stream the
 * main thread opens; every live message is decoded as it arrives (vLLM/SGLang, into the
 * stream's event tape) and sent on in groups, in arrival order, with the socket's
 * connect/disconnect events in between. At most `MAX_GROUPS` groups per stream wait for
 * the main thread's credit; meanwhile the socket is not read (its HWM then applies).
 * Groups are sent in the stream's own buffers (no copies), and the credit brings a
 * group's buffers back for a later one: in steady state a stream allocates none.
 *
 * Long file: a stream's socket (replaced at each disconnect), its receive loop, its
 * grouping and its buffer reuse share the stream's state, and the thread's command
 * dispatch is the rest.
 */

import { parentPort } from "node:worker_threads";
import "../transport/zmq-context.js"; // before any socket: room for > 1,023 sockets
import { Subscriber } from "zeromq";
import { type TapeBuffers, TapeWriter } from "../protocol/event-tape.js";
import { decodeEventBatch, decodeEventTape } from "../protocol/vllm-codec.js";
import {
  type DecodeReply,
  groupBuffers,
  type LiveGroup,
  type LiveSocketOptions,
  META_FIELDS,
  type ThreadCommand,
  type ThreadEvent,
  writeMeta,
} from "./decode-thread.js";

const port = parentPort;
if (port === null) throw new Error("decode-worker must run as a worker thread");
const send = (ev: ThreadEvent, transfer: ArrayBuffer[] = []) => port.postMessage(ev, transfer);

/** A group is sent once it has this many messages or bytes, else on the next loop turn. */
const GROUP_MESSAGES = 64;
const GROUP_BYTES = 1 << 20;
const MAX_GROUPS = 4;
/** A handed-back payload buffer larger than this (grown for a huge batch) is dropped. */
const MAX_KEPT_BYTES = 4 * GROUP_BYTES;
/**
 * Handed-back sets kept per stream (more are dropped). A flood cycles one set per group
 * (a credit returns one as a flush takes one), so two suffice; a quiet stream keeps no
 * more than two sets besides the one it fills.
 */
const MAX_FREE_SETS = 2;
/**
 * A group whose payloads are smaller than this goes out as exact-size copies, and its
 * buffers stay here (the pre-reuse path). Handing whole buffer sets back and forth costs
 * more than copying a few kB: with 1,000 engines sending 4-block batches (one batch per
 * group), CPU per batch went 136 → 331–413 µs with every group handed back (`npm run
 * bench:engines`). Floods fill 1 MB groups and take the reuse path.
 */
export const SMALL_GROUP_BYTES = 16 * 1024;

/** One group's buffers, as `groupBuffers` lists them. */
interface BufferSet {
  readonly bytes: Uint8Array<ArrayBuffer>;
  readonly seqBytes: Uint8Array<ArrayBuffer>;
  readonly meta: Float64Array<ArrayBuffer>;
  /** Null: the tape writer allocates its own. */
  readonly tape: TapeBuffers | null;
}

function newBufferSet(): BufferSet {
  return {
    bytes: new Uint8Array(GROUP_BYTES),
    seqBytes: new Uint8Array(8 * GROUP_MESSAGES),
    meta: new Float64Array(GROUP_MESSAGES * META_FIELDS),
    tape: null,
  };
}

/** The buffers of a credit, or null if they are not a whole set. */
function bufferSet(buffers: readonly ArrayBuffer[]): BufferSet | null {
  if (buffers.length !== 6 || buffers.some((b) => b.byteLength === 0)) return null;
  const [bytes, seqBytes, meta, records, words, tokens] = buffers as [
    ArrayBuffer,
    ArrayBuffer,
    ArrayBuffer,
    ArrayBuffer,
    ArrayBuffer,
    ArrayBuffer,
  ];
  if (bytes.byteLength > MAX_KEPT_BYTES) return null;
  if (meta.byteLength !== GROUP_MESSAGES * META_FIELDS * 8) return null;
  return {
    bytes: new Uint8Array(bytes),
    seqBytes: new Uint8Array(seqBytes),
    meta: new Float64Array(meta),
    tape: {
      records: new Float64Array(records),
      words: new Uint32Array(words),
      tokens: new Uint32Array(tokens),
    },
  };
}

class LiveStream {
  readonly #id: number;
  #sub: Subscriber;
  readonly #socket: LiveSocketOptions;
  readonly #options: { readonly fieldOrder: LiveSocketOptions["fieldOrder"] };
  readonly #writer = new TapeWriter();
  #closed = false;
  #outstanding = 0;
  #wake: (() => void) | null = null;
  #scheduled = false;
  /** Buffer sets handed back by the main thread, and how many were ever allocated. */
  readonly #free: BufferSet[] = [];
  #allocated = 1;
  // The group being collected.
  #frameCounts: number[] = [];
  #seqBytes: Uint8Array<ArrayBuffer>;
  #seqEnds: number[] = [];
  #bytes: Uint8Array<ArrayBuffer>;
  #ends: number[] = [];
  #meta: Float64Array<ArrayBuffer>;
  #others: (DecodeReply | null)[] = [];

  constructor(id: number, o: LiveSocketOptions) {
    this.#id = id;
    const first = newBufferSet();
    this.#bytes = first.bytes;
    this.#seqBytes = first.seqBytes;
    this.#meta = first.meta;
    this.#options = { fieldOrder: o.fieldOrder };
    this.#socket = o;
    this.#sub = this.#open();
    send({ type: "opened", stream: id });
    this.#writer.reset();
    void this.#loop();
  }

  /** A new SUB socket; `delayMs`: connect that much later (as ZeroMQ's reconnect would). */
  #open(delayMs = 0): Subscriber {
    const o = this.#socket;
    const sub = new Subscriber({
      linger: 0,
      receiveHighWaterMark: o.receiveHighWaterMark,
      reconnectInterval: o.reconnectInterval,
      reconnectMaxInterval: o.reconnectMaxInterval,
      heartbeatInterval: o.heartbeatInterval,
      heartbeatTimeout: o.heartbeatInterval * 3,
    });
    for (const name of ["connect", "disconnect"] as const) {
      sub.events.on(name, () => {
        if (this.#closed || sub !== this.#sub) return;
        this.#flush(); // messages received before the event go first
        send({ type: "event", stream: this.#id, name });
        // Messages of the lost connection still unread in the socket (while credits are
        // out, it is not read) would follow the event: a new socket drops them. They are
        // batches missed like any other, replayed or counted as a loss.
        if (name === "disconnect") {
          sub.close();
          this.#sub = this.#open(o.reconnectInterval);
        }
      });
    }
    sub.subscribe(o.topic);
    if (delayMs === 0) sub.connect(o.endpoint);
    else {
      setTimeout(() => {
        if (!this.#closed && sub === this.#sub) sub.connect(o.endpoint);
      }, delayMs).unref();
    }
    return sub;
  }

  credit(buffers: readonly ArrayBuffer[] = []): void {
    const set = bufferSet(buffers);
    if (set !== null && this.#free.length < MAX_FREE_SETS) this.#free.push(set);
    this.#outstanding--;
    const wake = this.#wake;
    this.#wake = null;
    wake?.();
  }

  close(): void {
    this.#closed = true;
    this.#sub.close();
    this.credit();
    send({ type: "closed", stream: this.#id });
  }

  async #loop(): Promise<void> {
    while (!this.#closed) {
      while (this.#outstanding >= MAX_GROUPS && !this.#closed) {
        await new Promise<void>((resolve) => {
          this.#wake = resolve;
        });
      }
      if (this.#closed) return;
      let frames: Buffer[];
      const sub = this.#sub;
      try {
        frames = await sub.receive();
      } catch (err) {
        if (this.#closed) return;
        if (sub !== this.#sub) continue; // replaced at a disconnect
        send({ type: "error", stream: this.#id, message: String(err) });
        await new Promise((resolve) => setTimeout(resolve, 100));
        continue;
      }
      if (this.#closed) return;
      if (sub !== this.#sub) continue; // read from the lost connection's socket: dropped
      this.#add(frames);
    }
  }

  #add(frames: Buffer[]): void {
    const i = this.#frameCounts.length;
    this.#frameCounts.push(frames.length);
    if (frames.length === 3) {
      const seq = frames[1]!;
      const payload = frames[2]!;
      this.#seqBytes = append(this.#seqBytes, this.#seqEnds, seq);
      this.#bytes = append(this.#bytes, this.#ends, payload);
      const taped = decodeEventTape(payload, this.#writer, this.#options);
      if (taped?.ok) writeMeta(this.#meta, i, taped.tape, taped.skipped);
      else {
        const r = taped ?? decodeEventBatch(payload, this.#options);
        this.#other(
          i,
          r.ok
            ? { ok: true, skipped: r.skipped, tape: null, batch: r.batch }
            : { ok: false, error: r.error },
        );
      }
    } else {
      this.#seqEnds.push(this.#seqEnds.at(-1) ?? 0);
      this.#ends.push(this.#ends.at(-1) ?? 0);
      this.#other(i, null);
    }
    const n = this.#frameCounts.length;
    if (n >= GROUP_MESSAGES || (this.#ends.at(-1) ?? 0) >= GROUP_BYTES) this.#flush();
    else if (!this.#scheduled) {
      this.#scheduled = true;
      setImmediate(() => {
        this.#scheduled = false;
        this.#flush();
      });
    }
  }

  #other(i: number, reply: DecodeReply | null): void {
    this.#meta[i * META_FIELDS] = -1;
    while (this.#others.length < i) this.#others.push(null);
    this.#others.push(reply);
  }

  #flush(): void {
    const n = this.#frameCounts.length;
    if (n === 0 || this.#closed) return;
    const total = this.#ends[n - 1]!;
    if (total < SMALL_GROUP_BYTES) {
      this.#flushCopies(n, total);
      return;
    }
    let next = this.#free.pop();
    if (next === undefined) {
      next = newBufferSet();
      this.#allocated++;
    }
    const group: LiveGroup = {
      type: "live",
      stream: this.#id,
      frameCounts: this.#frameCounts,
      seqBytes: this.#seqBytes,
      seqEnds: this.#seqEnds,
      bytes: this.#bytes,
      ends: this.#ends,
      meta: this.#meta,
      arrays: this.#writer.take(next.tape),
      others: this.#others,
      allocated: this.#allocated,
      reuse: true,
    };
    this.#send(group);
    this.#bytes = next.bytes;
    this.#seqBytes = next.seqBytes;
    this.#meta = next.meta;
  }

  /** A small group: exact-size copies go out; this stream keeps its buffers. */
  #flushCopies(n: number, total: number): void {
    const group: LiveGroup = {
      type: "live",
      stream: this.#id,
      frameCounts: this.#frameCounts,
      seqBytes: this.#seqBytes.slice(0, this.#seqEnds[n - 1]!),
      seqEnds: this.#seqEnds,
      bytes: this.#bytes.slice(0, total),
      ends: this.#ends,
      meta: this.#meta.slice(0, n * META_FIELDS),
      arrays: this.#writer.finish(),
      others: this.#others,
      allocated: this.#allocated,
      reuse: false,
    };
    this.#send(group);
  }

  /** Transfers a group's buffers to the main thread and starts the next group. */
  #send(group: LiveGroup): void {
    send(group, groupBuffers(group));
    this.#outstanding++;
    this.#frameCounts = [];
    this.#seqEnds = [];
    this.#ends = [];
    this.#others = [];
    this.#writer.reset();
  }
}

/** Appends `data` to `buf` at the last end in `ends` (growing `buf`); returns the buffer. */
function append(
  buf: Uint8Array<ArrayBuffer>,
  ends: number[],
  data: Uint8Array,
): Uint8Array<ArrayBuffer> {
  const at = ends.at(-1) ?? 0;
  const end = at + data.length;
  let out = buf;
  if (end > out.length) {
    out = new Uint8Array(Math.max(end, 2 * out.length));
    out.set(buf.subarray(0, at));
  }
  out.set(data, at);
  ends.push(end);
  return out;
}

const streams = new Map<number, LiveStream>();

port.on("message", (cmd: ThreadCommand) => {
  switch (cmd.type) {
    case "open":
      streams.set(cmd.stream, new LiveStream(cmd.stream, cmd.socket));
      return;
    case "credit":
      streams.get(cmd.stream)?.credit(cmd.buffers);
      return;
    case "close": {
      const stream = streams.get(cmd.stream);
      streams.delete(cmd.stream);
      if (stream !== undefined) stream.close();
      else send({ type: "closed", stream: cmd.stream });
      return;
    }
    case "shutdown":
      for (const stream of streams.values()) stream.close();
      streams.clear();
      // Nothing else keeps the thread alive: it exits once the sockets are released.
      port.close();
      return;
    default: {
      const unknown: never = cmd;
      throw new TypeError(`unknown command ${(unknown as { type: string }).type}`);
    }
  }
});

send({ type: "ready" });
