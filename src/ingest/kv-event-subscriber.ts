/**
 * One engine stream (a worker and one data-parallel rank) into the prefix index.
 *
 * A SUB socket receives `[topic, seq, payload]` (wire-formats §1). Batches are applied
 * strictly in sequence order and synchronously, so the index always reflects a prefix
 * of the engine's stream. What breaks the order is repaired or made explicit:
 *
 * - a gap (seq jumps ahead) asks the engine's replay endpoint for the missing batches;
 *   live batches wait in a queue meanwhile and are applied after, duplicates dropped;
 * - a hole replay cannot fill (buffer too short, no endpoint, timeout) and a sequence
 *   going backwards (engine restart) drop the worker from the index: its state is
 *   unknown, and an empty entry only costs cache hits, while a stale one misroutes;
 * - on first contact the subscriber replays from 0 to recover what the engine still
 *   buffers (a router restart then loses nothing the engine kept);
 * - after a reconnect it replays from the last seq it applied and compares that batch
 *   with its own copy: a different or missing batch means the engine restarted (its
 *   seq went back to 0) even if the new stream is already past our seq or quiet.
 *
 * Nothing escapes: decode errors, malformed frames and socket failures are counted in
 * `state()` and logged, and `close()` always completes.
 *
 * With `decodeThread`, the SUB socket lives on the decode thread, which also decodes;
 * messages arrive here in groups, in order, and go through the same steps.
 *
 * Long file: transport, sequencing and apply in one class; the sequencing rules are
 * being moved into a pure sequencer (see docs/ingestion.md).
 */

import "../transport/zmq-context.js"; // before any socket: room for > 1,023 sockets
import { Subscriber } from "zeromq";
import type { PrefixIndex } from "../index/types.js";
import { tapeEventType } from "../protocol/event-tape.js";
import type { EventBatch } from "../protocol/events.js";
import { parseWorkerKey, type WorkerKey } from "../protocol/worker.js";
import { ReplayClient, type ReplayOutcome } from "../transport/replay-client.js";
import { decodeSeq } from "../transport/seq.js";
import { type LogSink, noopLogger } from "../util/log-sink.js";
import { applySlicer } from "./apply-slicer.js";
import {
  type BatchDecodeResult,
  createStreamDecoder,
  type StreamDecoder,
} from "./batch-decoder.js";
import { type DecodeReply, DecodeThread, type LiveGroup, replyOf } from "./decode-thread.js";
import { PendingQueue } from "./pending-queue.js";
import {
  type ResetReason,
  StreamCounters,
  type StreamFormat,
  type StreamState,
} from "./stream-state.js";
import { applyTapeEvent } from "./tape-apply.js";

export interface KvEventSubscriberOptions {
  /** The (worker, dp rank) this stream feeds; the rank is checked against each batch. */
  readonly worker: WorkerKey;
  /** PUB endpoint to connect to, e.g. `tcp://10.0.0.5:5557`. */
  readonly endpoint: string;
  /** Replay ROUTER endpoint; null when the engine has none (gaps then clear the worker). */
  readonly replayEndpoint: string | null;
  /** SUB prefix filter; "" receives everything. */
  readonly topic: string;
  readonly format: StreamFormat;
  /** Longest silence tolerated from the replay endpoint before giving up. Default 2000. */
  readonly replayTimeoutMs?: number;
  /** ZeroMQ reconnect interval after the engine goes away. Default 100 ms. */
  readonly reconnectIntervalMs?: number;
  /** Cap of ZeroMQ's exponential reconnect back-off. Default 5000 ms. */
  readonly reconnectMaxIntervalMs?: number;
  /** SUB receive high-water mark in messages (0 = unlimited). Default 1,000,000. */
  readonly receiveHighWaterMark?: number;
  /** ZMTP heartbeat interval to detect dead peers, ms (0 = off). Default 10,000. */
  readonly heartbeatIntervalMs?: number;
  /** Decoder override (custom formats); default: a fresh one for `format`. */
  readonly decoder?: StreamDecoder;
  /**
   * Receive and decode live batches on the process's decode thread (decode-thread.ts)
   * while this thread applies earlier ones; replays stay here. Same order, outcomes and
   * counters as without; only for the stateless vLLM/SGLang decoders (ignored for
   * Mooncake or a custom `decoder`). Default false.
   */
  readonly decodeThread?: boolean;
}

export interface KvEventSubscriberDeps {
  readonly logger?: LogSink;
  /** Wall clock in ms, for `lastEventTimeMs`. Default `Date.now`. */
  readonly now?: () => number;
  /** The SUB socket connected (true) or lost its publisher (false): a liveness signal. */
  readonly onConnection?: (worker: WorkerKey, connected: boolean) => void;
}

/** Log at most this many decode errors per stream, then one in `LOG_EVERY`. */
const LOG_FIRST = 10;
const LOG_EVERY = 1000;

export class KvEventSubscriber {
  readonly #opts: KvEventSubscriberOptions;
  readonly #index: PrefixIndex;
  readonly #log: LogSink;
  readonly #now: () => number;
  readonly #onConnection: KvEventSubscriberDeps["onConnection"];
  readonly #decoder: StreamDecoder;
  readonly #dpRank: number;
  /** The first seq a fresh publisher sends: 0 (vLLM, SGLang) or 1 (Mooncake main). */
  readonly #firstSeq: bigint;
  readonly #c = new StreamCounters();
  /** The SUB socket, when this thread receives (not with a decode thread). */
  #sub: Subscriber | null = null;
  readonly #replay: ReplayClient | null;
  readonly #pending = new PendingQueue();
  #loop: Promise<void> = Promise.resolve();
  #closing: Promise<void> | null = null;
  #replayTask: Promise<void> = Promise.resolve();
  #closed = false;
  /** Seqs in [dupLow, dupHigh] were delivered by the last replay: live copies are dropped. */
  #dupLow: bigint | null = null;
  #dupHigh: bigint | null = null;
  #problemsLogged = 0;
  /** The payload of the last applied batch, to recognise the same stream after a reconnect. */
  #lastPayload: Uint8Array | null = null;
  #sawDisconnect = false;
  /** During a reconnect check: our copy of batch `lastSeq`, until the first reply is seen. */
  #verify: Uint8Array | null = null;
  #restartSeen = false;
  /** A reconnect happened during a replay: verify the stream once that replay is done. */
  #checkPending = false;
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
    this.#decoder = options.decoder ?? createStreamDecoder(options.format);
    this.#dpRank = parseWorkerKey(options.worker).dpRank;
    this.#firstSeq = options.format === "mooncake" ? 1n : 0n;
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
          endpoint: options.endpoint,
          topic: options.topic,
          receiveHighWaterMark: options.receiveHighWaterMark ?? 1_000_000,
          reconnectInterval: options.reconnectIntervalMs ?? 100,
          reconnectMaxInterval: options.reconnectMaxIntervalMs ?? 5000,
          heartbeatInterval: options.heartbeatIntervalMs ?? 10_000,
          fieldOrder: options.format === "sglang" ? "sglang" : "vllm",
        },
        {
          onOpened: () => this.#firstContact(),
          onGroup: (g) => this.#onGroup(g),
          onEvent: (name) => (name === "connect" ? this.#onConnect() : this.#onDisconnect()),
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
   * says so): recover by replay whatever the engine still buffers. Live batches queue
   * meanwhile.
   */
  #firstContact(): void {
    if (this.#contacted || this.#closed) return;
    this.#contacted = true;
    if (this.#replay !== null) this.#startReplay(0n);
  }

  /** Receive on this thread: own SUB socket and receive loop. */
  #openSocket(): void {
    const options = this.#opts;
    const heartbeat = options.heartbeatIntervalMs ?? 10_000;
    const sub = new Subscriber({
      linger: 0,
      receiveHighWaterMark: options.receiveHighWaterMark ?? 1_000_000,
      reconnectInterval: options.reconnectIntervalMs ?? 100,
      reconnectMaxInterval: options.reconnectMaxIntervalMs ?? 5000,
      heartbeatInterval: heartbeat,
      heartbeatTimeout: heartbeat * 3,
    });
    this.#sub = sub;
    sub.events.on("connect", () => this.#onConnect());
    sub.events.on("disconnect", () => this.#onDisconnect());
    sub.subscribe(options.topic);
    sub.connect(options.endpoint);
    this.#loop = this.#receiveLoop(sub);
  }

  #onConnect(): void {
    if (this.#closed) return;
    this.#c.connected = true;
    const { worker, endpoint } = this.#opts;
    this.#log.info({ worker, endpoint }, "kv events connected");
    this.#onConnection?.(worker, true);
    if (this.#sawDisconnect) this.#checkAfterReconnect();
  }

  #onDisconnect(): void {
    this.#c.connected = false;
    this.#sawDisconnect = true;
    const { worker, endpoint } = this.#opts;
    this.#log.warn({ worker, endpoint }, "kv events disconnected");
    if (!this.#closed) this.#onConnection?.(worker, false);
  }

  #onReceiveError(err: string): void {
    this.#log.error({ worker: this.#opts.worker, err }, "kv events receive failed");
  }

  /** The decode thread died: receive here from now on (checked like a reconnect). */
  #onThreadLost(): void {
    if (this.#closed) return;
    this.#stream = -1;
    this.#c.connected = false;
    this.#sawDisconnect = true;
    this.#log.error({ worker: this.#opts.worker }, "kv events decode thread lost, receiving here");
    this.#openSocket();
    this.#firstContact();
  }

  /**
   * Threaded mode: one group of live messages from the decode thread, in arrival order;
   * each is applied when the event-loop turn has room (apply-slicer.ts).
   */
  #onGroup(g: LiveGroup): void {
    let s0 = 0;
    let p0 = 0;
    for (let i = 0; i < g.frameCounts.length; i++) {
      const frames = g.frameCounts[i]!;
      const seqFrame = g.seqBytes.subarray(s0, g.seqEnds[i]!);
      const payload = g.bytes.subarray(p0, g.ends[i]!);
      const decoded = frames === 3 ? replyOf(g, i) : null;
      applySlicer.run(() => {
        if (!this.#closed) this.#onMessage(frames, seqFrame, payload, decoded);
      });
      s0 = g.seqEnds[i]!;
      p0 = g.ends[i]!;
    }
    applySlicer.run(() => this.#thread!.credit(this.#stream));
  }

  /** The stream's identity and counters, as of now. */
  state(): StreamState {
    return this.#c.snapshot({
      worker: this.#opts.worker,
      endpoint: this.#opts.endpoint,
      replayEndpoint: this.#opts.replayEndpoint,
      topic: this.#opts.topic,
      format: this.#opts.format,
    });
  }

  /** Stop receiving and release the sockets. The index is left as is. */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.#closed = true;
    this.#replay?.close();
    this.#sub?.close();
    const stream = this.#stream >= 0 ? this.#thread!.closeStream(this.#stream) : undefined;
    this.#pending.clear();
    this.#c.connected = false;
    await Promise.all([this.#loop, this.#replayTask, stream]);
    if (this.#thread !== null) await DecodeThread.release();
  }

  async #receiveLoop(sub: Subscriber): Promise<void> {
    while (!this.#closed) {
      let frames: Buffer[];
      try {
        frames = await sub.receive();
      } catch (err) {
        if (this.#closed) return;
        this.#onReceiveError(String(err));
        await new Promise((resolve) => setTimeout(resolve, 100));
        continue;
      }
      if (this.#closed) return;
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
      this.#logProblem({ frames }, "kv events message is not [topic, seq8, payload]");
      return;
    }
    if (this.#pending.length === 0 && !this.#c.replaying) {
      if (this.#step(seq, payload!, decoded)) return;
    }
    this.#pending.push({ seq, payload: payload!, decoded });
    this.#drain();
  }

  /** Apply queued live batches until the queue is empty or a replay starts. */
  #drain(): void {
    while (!this.#c.replaying && !this.#closed) {
      const head = this.#pending.peek();
      if (head === undefined) return;
      if (!this.#step(head.seq, head.payload, head.decoded ?? null)) return;
      this.#pending.dropHead();
    }
  }

  /**
   * Handle one live batch in stream order. Returns false when it must wait for a replay
   * it has just started (the caller keeps it queued).
   */
  #step(seq: bigint, payload: Uint8Array, decoded: DecodeReply | null): boolean {
    const last = this.#c.lastSeq;
    const expected = last === null ? 0n : last + 1n;
    if (this.#isNext(seq)) {
      this.#dupLow = this.#dupHigh = null; // FIFO: no replayed copy can follow a newer batch
      this.#apply(seq, payload, false, decoded);
      return true;
    }
    if (seq < expected) {
      if (this.#dupLow !== null && this.#dupHigh !== null) {
        if (seq >= this.#dupLow && seq <= this.#dupHigh) {
          this.#c.duplicates++;
          return true;
        }
      }
      this.#reset("restart", { seq: String(seq), lastSeq: String(last) });
      this.#c.lastSeq = null;
      this.#lastPayload = null;
      this.#dupLow = this.#dupHigh = null;
      return this.#step(seq, payload, decoded); // expected is now 0 ≤ seq: no further recursion
    }
    if (last !== null) this.#c.gaps++;
    if (this.#replay !== null) {
      this.#log.info(
        { worker: this.#opts.worker, from: String(expected), seen: String(seq) },
        "kv events gap, requesting replay",
      );
      this.#startReplay(expected);
      return false;
    }
    this.#reset(last === null ? "startup_hole" : "unfilled_gap", {
      missingFrom: String(expected),
      resumeAt: String(seq),
      why: "no replay endpoint",
    });
    this.#apply(seq, payload, false, decoded);
    return true;
  }

  /** True when `seq` directly follows what was applied (or opens a fresh stream). */
  #isNext(seq: bigint): boolean {
    const last = this.#c.lastSeq;
    return last === null ? seq <= this.#firstSeq : seq === last + 1n;
  }

  /** Replay from our last seq and compare: same batch = same stream, else a restart. */
  #checkAfterReconnect(): void {
    const last = this.#c.lastSeq;
    if (this.#closed || this.#replay === null || last === null) return;
    if (this.#c.replaying) {
      // The engine may have restarted under this very replay: check once it is over.
      this.#checkPending = true;
      return;
    }
    if (this.#lastPayload === null) return;
    this.#verify = this.#lastPayload;
    this.#startReplay(last);
  }

  #startReplay(from: bigint): void {
    const replay = this.#replay!;
    this.#c.replaying = true;
    this.#c.replays++;
    this.#replayTask = replay
      .request(from, (seq, payload) => this.#onReplayed(seq, payload))
      .then((outcome) => this.#onReplayDone(from, outcome));
  }

  #onReplayed(seq: bigint, payload: Uint8Array): boolean {
    if (this.#closed) return false;
    const last = this.#c.lastSeq;
    const ours = this.#verify;
    if (ours !== null) {
      this.#verify = null; // only the first reply can be compared
      if (seq === last) {
        if (Buffer.compare(ours, payload) === 0) {
          this.#c.duplicates++;
          return true;
        }
        this.#restartSeen = true;
        return false;
      }
    }
    const expected = last === null ? 0n : last + 1n;
    if (seq < expected) {
      this.#c.duplicates++;
      return true;
    }
    if (seq > expected && !this.#isNext(seq)) {
      // The buffer no longer reaches back to what we miss.
      this.#reset(last === null ? "startup_hole" : "unfilled_gap", {
        missingFrom: String(expected),
        resumeAt: String(seq),
        why: "replay buffer starts later",
      });
    }
    this.#apply(seq, payload, true, null);
    return true;
  }

  #onReplayDone(from: bigint, outcome: ReplayOutcome): void {
    if (this.#closed) return;
    this.#c.replaying = false;
    if (outcome.status === "failed") {
      this.#c.replayFailures[outcome.reason]++;
      this.#log.warn(
        { worker: this.#opts.worker, from: String(from), ...outcome },
        "kv events replay failed",
      );
    } else if (this.#verify !== null) {
      // The engine no longer has the batch we applied last: its stream is shorter, a restart.
      this.#restartSeen = true;
    }
    this.#verify = null;
    if (this.#restartSeen) {
      this.#restartSeen = false;
      this.#reset("restart", {
        lastSeq: String(this.#c.lastSeq),
        why: "stream differs after reconnect",
      });
      this.#c.lastSeq = null;
      this.#lastPayload = null;
      this.#dupLow = this.#dupHigh = null;
      this.#startReplay(0n);
      return;
    }
    if (this.#checkPending) {
      this.#checkPending = false;
      if (this.#c.lastSeq !== null && this.#lastPayload !== null) {
        // Queued live batches wait: they may come from a restarted engine whose seqs
        // overlap what this replay brought back.
        this.#verify = this.#lastPayload;
        this.#startReplay(this.#c.lastSeq);
        return;
      }
    }
    const last = this.#c.lastSeq;
    this.#dupLow = from;
    this.#dupHigh = last;
    const head = this.#pending.peek();
    const expected = last === null ? 0n : last + 1n;
    if (head !== undefined && head.seq > expected && !this.#isNext(head.seq)) {
      // What replay did not bring back is lost: resume from the first live batch.
      this.#reset(last === null ? "startup_hole" : "unfilled_gap", {
        missingFrom: String(expected),
        resumeAt: String(head.seq),
        why: outcome.status === "failed" ? `replay ${outcome.reason}` : "replay ended short",
      });
      this.#c.lastSeq = head.seq - 1n;
    }
    this.#drain();
  }

  #reset(reason: ResetReason, detail: Record<string, unknown>): void {
    this.#index.removeWorker(this.#opts.worker);
    this.#decoder.reset();
    this.#c.resets[reason]++;
    const record = { worker: this.#opts.worker, reason, ...detail };
    const msg = "kv events stream reset, worker cleared";
    if (reason === "startup_hole") this.#log.info(record, msg);
    else this.#log.warn(record, msg);
  }

  /**
   * Decode (unless `decoded` ahead on the decode thread) and apply one batch,
   * synchronously. Advances the sequence even if undecodable.
   */
  #apply(seq: bigint, payload: Uint8Array, replayed: boolean, decoded: DecodeReply | null): void {
    const c = this.#c;
    c.batches++;
    if (replayed) c.replayedBatches++;
    c.lastSeq = seq;
    this.#lastPayload = payload;
    c.lastEventTimeMs = this.#now();
    const result: BatchDecodeResult | DecodeReply = decoded ?? this.#decoder.decode(payload);
    if (!result.ok) {
      c.countDecodeError(result.error.code);
      this.#logProblem(
        { seq: String(seq), code: result.error.code, error: result.error.message },
        "kv events batch undecodable, skipped",
      );
      return;
    }
    const { skipped } = result;
    const tape = "tape" in result ? result.tape : null;
    const batch = tape === null ? (result as { batch: EventBatch }).batch : null;
    const dpRank = tape !== null ? tape.dpRank : batch!.dpRank;
    c.skipped.unknownTag += skipped.unknownTag;
    c.skipped.nonMainGroup += skipped.nonMainGroup;
    c.skipped.unknownKeys += skipped.unknownKeys;
    if (dpRank !== null && dpRank !== this.#dpRank) {
      c.dpRankMismatches++;
      this.#logProblem(
        { seq: String(seq), batchRank: dpRank, expectedRank: this.#dpRank },
        "kv events batch from another data-parallel rank (endpoint misconfigured?)",
      );
    }
    const worker = this.#opts.worker;
    const index = this.#index;
    try {
      if (tape !== null) {
        for (let i = 0; i < tape.events; i++) {
          c.countEvent(tapeEventType(tape, i), applyTapeEvent(index, worker, tape, i).status);
        }
      } else {
        for (const event of batch!.events) {
          c.countEvent(event.type, index.applyEvent(worker, event).status);
        }
      }
    } catch (err) {
      c.applyErrors++;
      this.#logProblem({ seq: String(seq), err: String(err) }, "kv events batch failed to apply");
    }
  }

  #logProblem(detail: Record<string, unknown>, msg: string): void {
    const n = ++this.#problemsLogged;
    if (n <= LOG_FIRST || n % LOG_EVERY === 0) {
      this.#log.warn({ worker: this.#opts.worker, occurrence: n, ...detail }, msg);
    }
  }
}
