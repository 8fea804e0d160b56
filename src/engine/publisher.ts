/**
 * An engine's side of the KV event transport, behaving like vLLM's `ZmqEventPublisher`
 * (wire-formats §1): a PUB socket sends `[topic, seq8, payload]` with seq from 0, +1
 * per batch, and a ROUTER answers replay requests from a bounded buffer of past
 * batches. Used by integration tests, the ingest benchmark and the simulated worker.
 *
 * Test hooks: `dropNext()` loses batches on the wire (they still take a seq and stay in
 * the replay buffer, as a message dropped by a full HWM would), and `publishRaw()`
 * sends arbitrary payloads (malformed ones included).
 */

import "../transport/zmq-context.js"; // before any socket: room for > 1,023 sockets
import { Publisher, Router } from "zeromq";
import { type EncodeOptions, encodeEventBatch, type WireBatch } from "../protocol/event-encoder.js";
import { endpointForRank } from "../transport/endpoint.js";
import { END_SEQ_FRAME, encodeSeq } from "../transport/seq.js";

/** Replay reply layouts: vLLM ≥ 0.26, older vLLM/SGLang, Mooncake's dev branch. */
export type ReplayLayout = "new" | "old" | "mooncake-dev";

export interface EnginePublisherOptions {
  /** Rank 0's PUB bind address: `tcp://*:5557`, or `tcp://127.0.0.1:*` for an OS port. */
  readonly endpoint: string;
  /** Rank 0's replay ROUTER bind address; null/absent = no replay socket. */
  readonly replayEndpoint?: string | null;
  /** Data-parallel rank: both ports are offset by it, and batches carry it. Default 0. */
  readonly dataParallelRank?: number;
  /** Default "". */
  readonly topic?: string;
  /** Batches kept for replay. Default 10,000 (vLLM's default). */
  readonly bufferSteps?: number;
  /** Default "new". */
  readonly replayLayout?: ReplayLayout;
  /** Passed to the encoder: event/envelope form, hash form. */
  readonly encoding?: Partial<EncodeOptions>;
  /** PUB send high-water mark in messages. Default 100,000 (vLLM's `hwm`). */
  readonly sendHighWaterMark?: number;
  /** First sequence number. Default 0 (vLLM, SGLang; Mooncake main starts at 1). */
  readonly firstSeq?: bigint;
  /**
   * Send high-water mark of the replay ROUTER, in messages. Set, the ROUTER behaves as
   * vLLM's does (a plain `zmq.ROUTER`, HWM 1000, `send_multipart` without
   * ROUTER_MANDATORY): replies past the mark are dropped silently, end marker included,
   * when the requester reads slower than they are sent. Default: unlimited, no drops.
   */
  readonly replaySendHighWaterMark?: number;
}

interface Buffered {
  readonly seq: bigint;
  readonly seqFrame: Buffer;
  readonly payload: Uint8Array;
}

/** Bind, retrying while the OS still holds the port of a just-closed socket. */
async function bindWithRetry(socket: Publisher | Router, address: string): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await socket.bind(address);
      return;
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (code === "EADDRINUSE" && attempt >= 40) {
        // ZeroMQ's message names no address; callers say which setting it came from.
        throw Object.assign(new Error(`cannot bind ${address}: address already in use`), {
          code,
          address,
        });
      }
      if (code !== "EADDRINUSE") throw err;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

export class EnginePublisher {
  #pub: Publisher;
  readonly #pubOptions: { linger: number; sendHighWaterMark: number };
  readonly #router: Router | null;
  readonly #topic: Buffer;
  readonly #bufferSteps: number;
  readonly #layout: ReplayLayout;
  readonly #encoding: Partial<EncodeOptions> | undefined;
  readonly #rank: number;
  #buffer: Buffered[] = [];
  #bufferHead = 0;
  #nextSeq: bigint;
  #dropNext = 0;
  #queue: Buffer[][] = [];
  #pump: Promise<void> | null = null;
  #replayLoop: Promise<void> = Promise.resolve();
  #closed = false;
  /** Actual PUB endpoint (the OS port filled in). */
  readonly endpoint: string;
  /** Actual replay endpoint, or null. */
  readonly replayEndpoint: string | null;
  readonly stats = { published: 0, dropped: 0, sendErrors: 0, replayRequests: 0 };

  private constructor(
    options: EnginePublisherOptions,
    pub: Publisher,
    router: Router | null,
    endpoints: { pub: string; replay: string | null },
  ) {
    this.#pub = pub;
    this.#pubOptions = { linger: 0, sendHighWaterMark: options.sendHighWaterMark ?? 100_000 };
    this.#router = router;
    this.#topic = Buffer.from(options.topic ?? "", "utf8");
    this.#bufferSteps = options.bufferSteps ?? 10_000;
    this.#layout = options.replayLayout ?? "new";
    this.#encoding = options.encoding;
    this.#rank = options.dataParallelRank ?? 0;
    this.#nextSeq = options.firstSeq ?? 0n;
    this.endpoint = endpoints.pub;
    this.replayEndpoint = endpoints.replay;
    if (router !== null) this.#replayLoop = this.#serveReplay(router);
  }

  /** Bind the sockets (rank r at base port + r) and start serving replay requests. */
  static async bind(options: EnginePublisherOptions): Promise<EnginePublisher> {
    const rank = options.dataParallelRank ?? 0;
    if ((options.bufferSteps ?? 1) < 1) throw new RangeError("bufferSteps must be ≥ 1");
    const pub = new Publisher({
      linger: 0,
      sendHighWaterMark: options.sendHighWaterMark ?? 100_000,
    });
    let router: Router | null = null;
    try {
      await bindWithRetry(pub, endpointForRank(options.endpoint, rank));
      if (options.replayEndpoint != null) {
        const hwm = options.replaySendHighWaterMark;
        router =
          hwm === undefined
            ? new Router({ linger: 0, mandatory: true, sendHighWaterMark: 0 })
            : new Router({ linger: 0, mandatory: false, sendHighWaterMark: hwm });
        await bindWithRetry(router, endpointForRank(options.replayEndpoint, rank));
      }
    } catch (err) {
      pub.close();
      router?.close();
      throw err;
    }
    return new EnginePublisher(options, pub, router, {
      pub: pub.lastEndpoint!,
      replay: router?.lastEndpoint ?? null,
    });
  }

  /** The seq the next batch will get. */
  get nextSeq(): bigint {
    return this.#nextSeq;
  }

  /**
   * Encode and publish one batch (its `dpRank` defaults to this publisher's rank, as in
   * vLLM). Returns its seq. Sending is queued: call `flush()` to wait for the socket.
   */
  publish(batch: WireBatch): bigint {
    const withRank = batch.dpRank === null ? { ...batch, dpRank: this.#rank } : batch;
    return this.publishRaw(encodeEventBatch(withRank, this.#encoding));
  }

  /** Publish an already-encoded payload, well-formed or not. Returns its seq. */
  publishRaw(payload: Uint8Array): bigint {
    if (this.#closed) throw new Error("EnginePublisher is closed");
    const seq = this.#nextSeq;
    this.#nextSeq = seq + 1n;
    const seqFrame = encodeSeq(seq);
    this.#remember({ seq, seqFrame, payload });
    if (this.#dropNext > 0) {
      this.#dropNext--;
      this.stats.dropped++;
      return seq;
    }
    this.#queue.push([
      this.#topic,
      seqFrame,
      Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength),
    ]);
    this.#pump ??= this.#sendQueued();
    return seq;
  }

  /** Lose the next `count` batches on the wire (they keep their seq and stay replayable). */
  dropNext(count = 1): void {
    this.#dropNext += count;
  }

  /** Resolves once every queued batch has been handed to the PUB socket. */
  async flush(): Promise<void> {
    for (let pump = this.#pump; pump !== null; pump = this.#pump) {
      await pump;
      if (this.#pump === pump) return;
    }
  }

  /**
   * Test hook: cut every subscriber's connection (the PUB socket is closed), run `during`
   * (batches published meanwhile are lost on the wire but replayable), then open a new
   * PUB socket on the same port. Seq and replay buffer carry on: a network outage, not
   * an engine restart.
   */
  async interruptConnections(during: () => void | Promise<void> = () => {}): Promise<void> {
    await this.flush();
    await this.#pub.unbind(this.endpoint);
    this.#pub.close();
    const dropping = this.#dropNext;
    this.#dropNext = Number.POSITIVE_INFINITY;
    try {
      await during();
    } finally {
      this.#dropNext = dropping;
      this.#pub = new Publisher(this.#pubOptions);
      if (this.#closed) this.#pub.close();
      else await bindWithRetry(this.#pub, this.endpoint);
    }
  }

  /** Seq of the oldest batch still replayable, or null when the buffer is empty. */
  oldestBuffered(): bigint | null {
    return this.#buffer[this.#bufferHead]?.seq ?? null;
  }

  /** Close both sockets; queued batches not yet sent are discarded. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#queue = [];
    await this.#pump;
    // The replay ROUTER is closed without an unbind: unbinding a ROUTER whose requesters
    // just disconnected aborts the process inside libzmq 4.3.5 (`_state == term_ack_sent
    // || _state == term_req_sent2`, pipe.cpp:355) — 15 of 15 stress runs of 150 bind /
    // two replays / close cycles crashed with it, 0 of 9 without (mandatory or not).
    // Closing frees the port a moment later; `bindWithRetry` waits for it.
    await this.#pub.unbind(this.endpoint).catch(() => {});
    this.#pub.close();
    this.#router?.close();
    await this.#replayLoop;
  }

  #remember(entry: Buffered): void {
    this.#buffer.push(entry);
    if (this.#buffer.length - this.#bufferHead > this.#bufferSteps) {
      this.#bufferHead++;
      if (this.#bufferHead >= this.#bufferSteps) {
        this.#buffer = this.#buffer.slice(this.#bufferHead);
        this.#bufferHead = 0;
      }
    }
  }

  async #sendQueued(): Promise<void> {
    try {
      while (this.#queue.length > 0 && !this.#closed) {
        const batch = this.#queue;
        this.#queue = [];
        for (const frames of batch) {
          if (this.#closed) return;
          try {
            await this.#pub.send(frames);
            this.stats.published++;
          } catch {
            this.stats.sendErrors++;
          }
        }
      }
    } finally {
      this.#pump = null;
    }
  }

  async #serveReplay(router: Router): Promise<void> {
    while (!this.#closed) {
      let frames: Buffer[];
      try {
        frames = await router.receive();
      } catch {
        return; // closed
      }
      // [identity, "", start_seq]; anything else is ignored, as vLLM does.
      if (frames.length !== 3 || frames[1]!.length !== 0 || frames[2]!.length !== 8) continue;
      this.stats.replayRequests++;
      const start = frames[2]!.readBigUInt64BE(0);
      const id = frames[0]!;
      const snapshot = this.#buffer.slice(this.#bufferHead).filter((b) => b.seq >= start);
      try {
        for (const b of snapshot) await router.send(this.#replyFrames(id, b));
        await router.send(this.#endFrames(id));
      } catch {
        // The requester went away (ROUTER mandatory → EHOSTUNREACH) or we are closing.
      }
    }
  }

  #replyFrames(id: Buffer, b: Buffered): Uint8Array[] {
    const empty = Buffer.alloc(0);
    return this.#layout === "new"
      ? [id, empty, this.#topic, b.seqFrame, b.payload]
      : [id, empty, b.seqFrame, b.payload];
  }

  #endFrames(id: Buffer): Uint8Array[] {
    const empty = Buffer.alloc(0);
    switch (this.#layout) {
      case "new":
        return [id, empty, empty, END_SEQ_FRAME, empty];
      case "old":
        return [id, empty, END_SEQ_FRAME, empty];
      case "mooncake-dev":
        return [id, empty, empty, END_SEQ_FRAME];
    }
  }
}
