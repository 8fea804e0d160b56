/**
 * One engine stream (a worker and one data-parallel rank) into the prefix index: the
 * transport around the pure `Sequencer` (sequencer.ts: gaps, replays and their retries,
 * restarts, reconnect checks, first contact) and `applyBatch` (batch-apply.ts).
 *
 * A SUB socket receives `[topic, seq, payload]` (docs/wire-formats.md) — on the decode
 * thread with `decodeThread`, arriving here in ordered groups — and a `ReplayClient` asks
 * the replay ROUTER for batches when, and after the back-off, the sequencer says, once a
 * pool-wide slot is free. Socket (dis)connects go to the sequencer too. Nothing escapes:
 * errors are counted in `state()` and logged, and `close()` always completes.
 *
 * Long file: one stream's transport (socket or decode thread, replay requests, the
 * sequencer's actions, the snapshot's saved state) shares that stream's state.
 */

import "../transport/zmq-context.js"; // before any socket: room for > 1,023 sockets
import { createHash } from "node:crypto";
import { Subscriber } from "zeromq";
import type { SavedStream } from "../index/snapshot-codec.js";
import type { PrefixIndex } from "../index/types.js";
import { parseWorkerKey, type WorkerKey } from "../protocol/worker.js";
import { ReplayClient } from "../transport/replay-client.js";
import { decodeSeq } from "../transport/seq.js";
import { type LogSink, noopLogger } from "../util/log-sink.js";
import { applySlicer } from "./apply-slicer.js";
import { type ApplyTarget, applyBatch, problemLog } from "./batch-apply.js";
import { createStreamDecoder, type StreamDecoder } from "./batch-decoder.js";
import { type DecodeReply, DecodeThread, type LiveGroup, replyOf } from "./decode-thread.js";
import { type ReplaySlots, withReplaySlot } from "./replay-slots.js";
import { Sequencer, type SequencerAction } from "./sequencer.js";
import { StreamCounters, type StreamState } from "./stream-state.js";
import {
  type KvEventSubscriberDeps,
  type KvEventSubscriberOptions,
  subSocketSettings,
} from "./subscriber-options.js";

/** A batch as the sequencer carries it: bytes, and the decode thread's decode if any. */
interface Batch {
  readonly bytes: Uint8Array;
  readonly decoded: DecodeReply | null;
}

const sameBytes = (a: Batch, b: Batch) => Buffer.compare(a.bytes, b.bytes) === 0;

/**
 * 48 bits of the SHA-1 of a batch's bytes: what the sequencer keeps of a replayed batch
 * to compare its live copy with (~1 µs per KiB; only replayed batches and their live
 * copies are digested).
 */
const batchDigest = (b: Batch) => createHash("sha1").update(b.bytes).digest().readUIntBE(0, 6);

export class KvEventSubscriber {
  readonly #opts: KvEventSubscriberOptions;
  readonly #index: PrefixIndex;
  readonly #log: LogSink;
  readonly #now: () => number;
  readonly #onConnection: KvEventSubscriberDeps["onConnection"];
  readonly #decoder: StreamDecoder;
  readonly #c = new StreamCounters();
  readonly #seq: Sequencer<Batch>;
  readonly #target: ApplyTarget;
  readonly #slots: ReplaySlots | undefined;
  /** The SUB socket, when this thread receives (not with a decode thread). */
  #sub: Subscriber | null = null;
  /** Null without a replay endpoint, or once it was found to serve another stream. */
  #replay: ReplayClient | null;
  #loop: Promise<void> = Promise.resolve();
  #closing: Promise<void> | null = null;
  #replayTask: Promise<void> = Promise.resolve();
  readonly #abort = new AbortController();
  #closed = false;
  readonly #thread: DecodeThread | null;
  /** This stream's id on the decode thread (−1: none). */
  #stream = -1;
  /** The first-contact replay has been started. */
  #contacted = false;

  constructor(
    options: KvEventSubscriberOptions,
    index: PrefixIndex,
    deps: KvEventSubscriberDeps = {},
  ) {
    this.#opts = options;
    this.#index = index;
    this.#log = deps.logger ?? noopLogger;
    this.#now = deps.now ?? Date.now;
    this.#onConnection = deps.onConnection;
    this.#slots = deps.replaySlots;
    this.#decoder = options.decoder ?? createStreamDecoder(options.format);
    this.#seq = new Sequencer<Batch>({
      firstSeq: options.format === "mooncake" ? 1n : 0n,
      hasReplay: options.replayEndpoint !== null,
      maxAttempts: options.replayMaxAttempts,
      backoffMs: options.replayBackoffMs,
      backoffMaxMs: options.replayBackoffMaxMs,
      same: sameBytes,
      digest: batchDigest,
    });
    if (options.resume !== undefined && options.replayEndpoint !== null) {
      this.#seq.resume(options.resume.lastSeq, { bytes: options.resume.lastBatch, decoded: null });
      this.#c.lastSeq = options.resume.lastSeq;
    }
    this.#target = {
      worker: options.worker,
      dpRank: parseWorkerKey(options.worker).dpRank,
      index,
      decoder: this.#decoder,
      counters: this.#c,
      problem: problemLog(this.#log, options.worker),
    };
    this.#thread =
      options.decodeThread === true &&
      options.decoder === undefined &&
      options.format !== "mooncake"
        ? DecodeThread.acquire()
        : null;
    this.#replay =
      options.replayEndpoint === null
        ? null
        : new ReplayClient({
            endpoint: options.replayEndpoint,
            timeoutMs: options.replayTimeoutMs ?? 2000,
            reconnectIntervalMs: options.reconnectIntervalMs ?? 100,
          });
    if (this.#thread !== null) {
      this.#stream = this.#thread.openStream(
        {
          ...subSocketSettings(options),
          endpoint: options.endpoint,
          topic: options.topic,
          fieldOrder: options.format === "sglang" ? "sglang" : "vllm",
        },
        {
          onOpened: () => this.#firstContact(),
          onGroup: (g) => this.#onGroup(g),
          onEvent: (name) => this.#onThreadEvent(name === "connect"),
          onError: (message) => this.#onReceiveError(message),
          onLost: () => this.#onThreadLost(),
        },
      );
    }
    if (this.#stream < 0) {
      this.#openSocket();
      this.#firstContact();
    }
  }

  /**
   * First contact, once the SUB socket is connecting (at once, or when the decode thread
   * says so): recover by replay whatever the engine still buffers.
   */
  #firstContact(): void {
    if (this.#contacted || this.#closed) return;
    this.#contacted = true;
    this.#run(this.#seq.start());
  }

  /**
   * Receive on this thread: own SUB socket and receive loop. `delayMs`: connect that much
   * later (a replaced socket waits as ZeroMQ's own reconnect would, so a peer that drops
   * every connection is not reconnected in a tight loop).
   */
  #openSocket(delayMs = 0): void {
    const options = this.#opts;
    const settings = subSocketSettings(options);
    const sub = new Subscriber({
      linger: 0,
      ...settings,
      heartbeatTimeout: settings.heartbeatInterval * 3,
    });
    this.#sub = sub;
    sub.events.on("connect", () => this.#onConnect(sub));
    sub.events.on("disconnect", () => this.#onDisconnect(sub));
    sub.subscribe(options.topic);
    if (delayMs === 0) sub.connect(options.endpoint);
    else {
      setTimeout(() => {
        if (!this.#closed && sub === this.#sub) sub.connect(options.endpoint);
      }, delayMs).unref();
    }
    const loop = this.#loop;
    this.#loop = Promise.all([loop, this.#receiveLoop(sub)]).then(() => {});
  }

  #onConnect(sub: Subscriber): void {
    if (this.#closed || sub !== this.#sub) return;
    this.#noteConnection(true);
    this.#run(this.#seq.connected());
  }

  /**
   * The SUB socket lost its connection (`sub`: null when the decode thread died). The
   * socket is replaced: messages of the old connection still unread in it would arrive
   * after this event, and could be applied after the reset a restarted engine's reconnect
   * check makes. Dropped, they are batches missed like any other (replayed, or a loss).
   */
  #onDisconnect(sub: Subscriber | null): void {
    if (this.#closed || sub !== this.#sub) return;
    this.#noteConnection(false);
    this.#run(this.#seq.disconnected());
    if (sub === null) return;
    sub.close();
    this.#openSocket(subSocketSettings(this.#opts).reconnectInterval);
  }

  /** Counters, log line and the liveness signal of a connect or disconnect. */
  #noteConnection(connected: boolean): void {
    this.#c.connected = connected;
    const { worker, endpoint } = this.#opts;
    if (connected) this.#log.info({ worker, endpoint }, "kv events connected");
    else this.#log.warn({ worker, endpoint }, "kv events disconnected");
    this.#onConnection?.(worker, connected);
  }

  /**
   * Threaded mode: the decode thread saw the socket connect or disconnect after the
   * groups it sent before. Liveness follows at once (a dead engine leaves the
   * candidates now); the stream rules run in the apply queue behind those groups, so a
   * disconnect never overtakes batches the old connection delivered before it.
   */
  #onThreadEvent(connected: boolean): void {
    if (this.#closed) return;
    this.#noteConnection(connected);
    applySlicer.run(() => {
      if (!this.#closed) this.#run(connected ? this.#seq.connected() : this.#seq.disconnected());
    });
  }

  #onReceiveError(err: string): void {
    this.#log.error({ worker: this.#opts.worker, err }, "kv events receive failed");
  }

  /** The decode thread died: receive here from now on (checked like a reconnect). */
  #onThreadLost(): void {
    if (this.#closed) return;
    this.#stream = -1;
    this.#log.error({ worker: this.#opts.worker }, "kv events decode thread lost, receiving here");
    this.#onDisconnect(null);
    this.#openSocket();
    this.#firstContact();
  }

  /**
   * Threaded mode: one group of live messages from the decode thread, in arrival order;
   * one resumable slicer task applies a message per call while the event-loop turn has
   * room (apply-slicer.ts), then hands the group back.
   */
  #onGroup(g: LiveGroup): void {
    const n = g.frameCounts.length;
    let i = 0;
    let s0 = 0;
    let p0 = 0;
    applySlicer.runSteps(() => {
      if (i === n) {
        this.#handBack(g);
        return false;
      }
      const frames = g.frameCounts[i]!;
      const s1 = g.seqEnds[i]!;
      const p1 = g.ends[i]!;
      if (!this.#closed) {
        const decoded = frames === 3 ? replyOf(g, i) : null;
        this.#onMessage(frames, g.seqBytes.subarray(s0, s1), g.bytes.subarray(p0, p1), decoded);
      }
      s0 = s1;
      p0 = p1;
      i++;
      return true;
    });
  }

  /**
   * The group is applied: copy what the sequencer still holds of it (the last batch, live
   * batches queued behind a replay; their tapes are dropped, to be decoded here if they
   * are applied) and give its buffers back to the decode thread for reuse.
   */
  #handBack(g: LiveGroup): void {
    if (!g.reuse) {
      this.#thread!.creditBack(this.#stream, g); // exact-size copies: nothing is reused
      return;
    }
    const buffer = g.bytes.buffer;
    this.#seq.mapHeld((b) =>
      b.bytes.buffer !== buffer
        ? b
        : {
            bytes: b.bytes.slice(),
            decoded: b.decoded?.ok && b.decoded.tape !== null ? null : b.decoded,
          },
    );
    this.#thread!.creditBack(this.#stream, g);
  }

  /** The stream's identity and counters, as of now. */
  state(): StreamState {
    this.#c.lastSeq = this.#seq.lastSeq;
    return this.#c.snapshot({
      worker: this.#opts.worker,
      endpoint: this.#opts.endpoint,
      replayEndpoint: this.#opts.replayEndpoint,
      topic: this.#opts.topic,
      format: this.#opts.format,
    });
  }

  /**
   * What a snapshot keeps of this stream: the last applied seq and that batch's bytes
   * (null before any, or without a replay endpoint to resume from). Consistent with the
   * index at the same instant: batches are applied synchronously with the sequencer.
   */
  saved(): SavedStream | null {
    const last = this.#seq.lastSeq;
    const payload = this.#seq.lastPayload;
    if (last === null || payload === null || this.#replay === null || this.#closed) return null;
    return { worker: this.#opts.worker, lastSeq: last, lastBatch: payload.bytes.slice() };
  }

  /** The (worker, dp rank) of this stream. */
  get worker(): WorkerKey {
    return this.#opts.worker;
  }

  /** False while the stream catches up (its matches are not current). Cheap. */
  get current(): boolean {
    return this.#c.current;
  }

  /** Stop receiving and release the sockets. The index is left as is. */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.#closed = true;
    this.#abort.abort();
    this.#replay?.close();
    this.#sub?.close();
    const stream = this.#stream >= 0 ? this.#thread!.closeStream(this.#stream) : undefined;
    this.#c.connected = false;
    await Promise.all([this.#loop, this.#replayTask, stream]);
    if (this.#thread !== null) await DecodeThread.release();
  }

  async #receiveLoop(sub: Subscriber): Promise<void> {
    while (!this.#closed && sub === this.#sub) {
      let frames: Buffer[];
      try {
        frames = await sub.receive();
      } catch (err) {
        if (this.#closed || sub !== this.#sub) return;
        this.#onReceiveError(String(err));
        await new Promise((resolve) => setTimeout(resolve, 100));
        continue;
      }
      if (this.#closed || sub !== this.#sub) return; // replaced at a disconnect: dropped
      this.#onMessage(frames.length, frames[1], frames[2], null);
      if (applySlicer.spent()) await applySlicer.yieldTurn();
    }
  }

  /**
   * One live message, in arrival order: `frames` frames, the seq and payload frames when
   * there are 3; `decoded`: the payload's decode if the decode thread did it.
   */
  #onMessage(
    frames: number,
    seqFrame: Uint8Array | undefined,
    payload: Uint8Array | undefined,
    decoded: DecodeReply | null,
  ): void {
    const seq = frames === 3 ? decodeSeq(seqFrame!) : null;
    if (seq === null) {
      this.#c.malformedFrames++;
      this.#target.problem({ frames }, "kv events message is not [topic, seq8, payload]");
      return;
    }
    this.#run(this.#seq.live(seq, { bytes: payload!, decoded }));
  }

  /** Carry out the sequencer's actions, in order. */
  #run(actions: readonly SequencerAction<Batch>[]): void {
    const c = this.#c;
    for (const a of actions) {
      switch (a.kind) {
        case "apply":
          c.batches++;
          if (a.replayed) c.replayedBatches++;
          c.lastEventTimeMs = this.#now();
          applyBatch(this.#target, a.seq, a.payload.bytes, a.payload.decoded);
          break;
        case "duplicate":
          c.duplicates++;
          break;
        case "mismatch":
          this.#log.error(
            {
              worker: this.#opts.worker,
              endpoint: this.#opts.endpoint,
              replayEndpoint: this.#opts.replayEndpoint,
              seq: String(a.seq),
            },
            "kv events replay endpoint serves another stream (live batch differs from the " +
              "replayed one): worker cleared, replay off for this stream until restart",
          );
          this.#replay?.close();
          this.#replay = null;
          break;
        case "gap":
          c.gaps++;
          this.#log.info(
            { worker: this.#opts.worker, from: String(a.from), seen: String(a.seen) },
            "kv events gap, requesting replay",
          );
          break;
        case "reset":
          this.#index.removeWorker(this.#opts.worker);
          this.#decoder.reset();
          c.resets[a.reason]++;
          this.#log[a.reason === "startup_hole" ? "info" : "warn"](
            { worker: this.#opts.worker, reason: a.reason, detail: a.detail },
            "kv events stream reset, worker cleared",
          );
          break;
        case "status":
          c.current = a.current;
          break;
        case "replay":
          c.replaying = true;
          this.#replayTask = this.#requestReplay(a.from, a.delayMs);
          break;
      }
    }
    c.replaying = this.#seq.replaying;
  }

  /** One replay request: back-off, a pool slot, then read replies as they arrive. */
  async #requestReplay(from: bigint, delayMs: number): Promise<void> {
    const outcome = await withReplaySlot(this.#slots, delayMs, this.#abort.signal, () => {
      this.#c.replays++;
      return this.#replay!.request(from, (seq, payload) => {
        if (this.#closed) return false;
        this.#run(this.#seq.replayed(seq, { bytes: payload, decoded: null }));
        return this.#seq.wantsReplies;
      });
    });
    if (outcome === null || this.#closed) return;
    if (outcome.status === "failed") {
      this.#c.replayFailures[outcome.reason]++;
      this.#log.warn(
        { worker: this.#opts.worker, from: String(from), ...outcome },
        "kv events replay stopped early, resuming",
      );
    }
    this.#run(this.#seq.replayEnded(outcome));
  }
}
