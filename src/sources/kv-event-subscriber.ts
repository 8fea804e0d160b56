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
 */

import { Subscriber } from "zeromq";
import type { PrefixIndex } from "../index/types.js";
import { parseWorkerKey, type WorkerKey } from "../protocol/worker.js";
import { createStreamDecoder, type StreamDecoder } from "./batch-decoder.js";
import { noopLogger, type SourceLogger } from "./logger.js";
import { PendingQueue } from "./pending-queue.js";
import { ReplayClient, type ReplayOutcome } from "./replay-client.js";
import { decodeSeq } from "./seq.js";
import {
  type ResetReason,
  StreamCounters,
  type StreamFormat,
  type StreamState,
} from "./stream-state.js";

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
}

export interface KvEventSubscriberDeps {
  readonly logger?: SourceLogger;
  /** Wall clock in ms, for `lastEventTimeMs`. Default `Date.now`. */
  readonly now?: () => number;
}

/** Log at most this many decode errors per stream, then one in `LOG_EVERY`. */
const LOG_FIRST = 10;
const LOG_EVERY = 1000;

export class KvEventSubscriber {
  readonly #opts: KvEventSubscriberOptions;
  readonly #index: PrefixIndex;
  readonly #log: SourceLogger;
  readonly #now: () => number;
  readonly #decoder: StreamDecoder;
  readonly #dpRank: number;
  /** The first seq a fresh publisher sends: 0 (vLLM, SGLang) or 1 (Mooncake main). */
  readonly #firstSeq: bigint;
  readonly #c = new StreamCounters();
  readonly #sub: Subscriber;
  readonly #replay: ReplayClient | null;
  readonly #pending = new PendingQueue();
  readonly #loop: Promise<void>;
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

  constructor(
    options: KvEventSubscriberOptions,
    index: PrefixIndex,
    deps: KvEventSubscriberDeps = {},
  ) {
    this.#opts = options;
    this.#index = index;
    this.#log = deps.logger ?? noopLogger;
    this.#now = deps.now ?? Date.now;
    this.#decoder = options.decoder ?? createStreamDecoder(options.format);
    this.#dpRank = parseWorkerKey(options.worker).dpRank;
    this.#firstSeq = options.format === "mooncake" ? 1n : 0n;
    this.#replay =
      options.replayEndpoint === null
        ? null
        : new ReplayClient({
            endpoint: options.replayEndpoint,
            timeoutMs: options.replayTimeoutMs ?? 2000,
            reconnectIntervalMs: options.reconnectIntervalMs ?? 100,
          });
    const heartbeat = options.heartbeatIntervalMs ?? 10_000;
    this.#sub = new Subscriber({
      linger: 0,
      receiveHighWaterMark: options.receiveHighWaterMark ?? 1_000_000,
      reconnectInterval: options.reconnectIntervalMs ?? 100,
      reconnectMaxInterval: options.reconnectMaxIntervalMs ?? 5000,
      heartbeatInterval: heartbeat,
      heartbeatTimeout: heartbeat * 3,
    });
    this.#sub.events.on("connect", () => {
      this.#c.connected = true;
      this.#log.info({ worker: options.worker, endpoint: options.endpoint }, "kv events connected");
      if (this.#sawDisconnect) this.#checkAfterReconnect();
    });
    this.#sub.events.on("disconnect", () => {
      this.#c.connected = false;
      this.#sawDisconnect = true;
      this.#log.warn(
        { worker: options.worker, endpoint: options.endpoint },
        "kv events disconnected",
      );
    });
    this.#sub.subscribe(options.topic);
    this.#sub.connect(options.endpoint);
    // First contact: recover whatever the engine still buffers. Live batches queue meanwhile.
    if (this.#replay !== null) this.#startReplay(0n);
    this.#loop = this.#receiveLoop();
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
  async close(): Promise<void> {
    if (this.#closed) return this.#loop;
    this.#closed = true;
    this.#replay?.close();
    this.#sub.close();
    this.#pending.clear();
    this.#c.connected = false;
    await Promise.all([this.#loop, this.#replayTask]);
  }

  async #receiveLoop(): Promise<void> {
    while (!this.#closed) {
      let frames: Buffer[];
      try {
        frames = await this.#sub.receive();
      } catch (err) {
        if (this.#closed) return;
        this.#log.error(
          { worker: this.#opts.worker, err: String(err) },
          "kv events receive failed",
        );
        await new Promise((resolve) => setTimeout(resolve, 100));
        continue;
      }
      if (this.#closed) return;
      this.#onLive(frames);
    }
  }

  #onLive(frames: Buffer[]): void {
    const seq = frames.length === 3 ? decodeSeq(frames[1]!) : null;
    if (seq === null) {
      this.#c.malformedFrames++;
      this.#logProblem(
        { frames: frames.length },
        "kv events message is not [topic, seq8, payload]",
      );
      return;
    }
    const payload = frames[2]!;
    if (this.#pending.length === 0 && !this.#c.replaying) {
      if (this.#step(seq, payload)) return;
    }
    this.#pending.push({ seq, payload });
    this.#drain();
  }

  /** Apply queued live batches until the queue is empty or a replay starts. */
  #drain(): void {
    while (!this.#c.replaying && !this.#closed) {
      const head = this.#pending.peek();
      if (head === undefined) return;
      if (!this.#step(head.seq, head.payload)) return;
      this.#pending.dropHead();
    }
  }

  /**
   * Handle one live batch in stream order. Returns false when it must wait for a replay
   * it has just started (the caller keeps it queued).
   */
  #step(seq: bigint, payload: Uint8Array): boolean {
    const last = this.#c.lastSeq;
    const expected = last === null ? 0n : last + 1n;
    if (this.#isNext(seq)) {
      this.#dupLow = this.#dupHigh = null; // FIFO: no replayed copy can follow a newer batch
      this.#apply(seq, payload, false);
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
      return this.#step(seq, payload); // expected is now 0 ≤ seq: no further recursion
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
    this.#apply(seq, payload, false);
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
    this.#apply(seq, payload, true);
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

  /** Decode and apply one batch, synchronously. Advances the sequence even if undecodable. */
  #apply(seq: bigint, payload: Uint8Array, replayed: boolean): void {
    const c = this.#c;
    c.batches++;
    if (replayed) c.replayedBatches++;
    c.lastSeq = seq;
    this.#lastPayload = payload;
    c.lastEventTimeMs = this.#now();
    const result = this.#decoder.decode(payload);
    if (!result.ok) {
      c.countDecodeError(result.error.code);
      this.#logProblem(
        { seq: String(seq), code: result.error.code, error: result.error.message },
        "kv events batch undecodable, skipped",
      );
      return;
    }
    const { batch, skipped } = result;
    c.skipped.unknownTag += skipped.unknownTag;
    c.skipped.nonMainGroup += skipped.nonMainGroup;
    c.skipped.unknownKeys += skipped.unknownKeys;
    if (batch.dpRank !== null && batch.dpRank !== this.#dpRank) {
      c.dpRankMismatches++;
      this.#logProblem(
        { seq: String(seq), batchRank: batch.dpRank, expectedRank: this.#dpRank },
        "kv events batch from another data-parallel rank (endpoint misconfigured?)",
      );
    }
    const worker = this.#opts.worker;
    try {
      for (const event of batch.events) {
        c.countEvent(event.type, this.#index.applyEvent(worker, event).status);
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
