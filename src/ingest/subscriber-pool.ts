/**
 * All KV event streams of the fleet: one `KvEventSubscriber` per (worker, dp rank).
 * A worker with data-parallel size N has N streams; rank r's endpoints are rank 0's
 * with the port + r (vLLM's convention). Removing a worker closes its streams and drops
 * its blocks from the index, so a removed worker can never be matched.
 */

import type { SavedStream } from "../index/snapshot-codec.js";
import type { PrefixIndex } from "../index/types.js";
import { type WorkerKey, workerKey } from "../protocol/worker.js";
import { endpointForRank } from "../transport/endpoint.js";
import { KvEventSubscriber } from "./kv-event-subscriber.js";
import { ReplaySlots } from "./replay-slots.js";
import type { StreamFormat, StreamState } from "./stream-state.js";
import type { KvEventSubscriberDeps } from "./subscriber-options.js";

/** One worker's event source, as configured. */
export interface WorkerStreamConfig {
  readonly workerId: string;
  /** Rank 0's PUB endpoint, `tcp://host:P`. */
  readonly eventsEndpoint: string;
  /** Rank 0's replay endpoint, or null. */
  readonly replayEndpoint: string | null;
  readonly topic: string;
  /** Number of data-parallel ranks (≥ 1). */
  readonly dataParallelSize: number;
  readonly format: StreamFormat;
}

/** Settings shared by every stream of the pool. */
export interface SubscriberPoolOptions {
  readonly replayTimeoutMs?: number;
  readonly replayMaxAttempts?: number;
  readonly replayBackoffMs?: number;
  readonly replayBackoffMaxMs?: number;
  /**
   * Replay requests running at once across every stream of the pool; the others wait.
   * Default 4: a restarted router facing many engines reads their buffers a few at a
   * time instead of all together (docs/ingestion.md).
   */
  readonly maxConcurrentReplays?: number;
  readonly reconnectIntervalMs?: number;
  readonly reconnectMaxIntervalMs?: number;
  readonly receiveHighWaterMark?: number;
  readonly heartbeatIntervalMs?: number;
  /** Receive and decode on the process's decode thread (see `KvEventSubscriberOptions`). */
  readonly decodeThread?: boolean;
}

export const DEFAULT_MAX_CONCURRENT_REPLAYS = 4;

export class SubscriberPool {
  readonly #index: PrefixIndex;
  readonly #options: SubscriberPoolOptions;
  readonly #deps: KvEventSubscriberDeps;
  readonly #workers = new Map<string, KvEventSubscriber[]>();
  #closed = false;
  /** Saved stream states (a snapshot) waiting for their stream to be added. */
  #resume = new Map<WorkerKey, SavedStream>();

  constructor(
    index: PrefixIndex,
    options: SubscriberPoolOptions = {},
    deps: KvEventSubscriberDeps = {},
  ) {
    this.#index = index;
    this.#options = options;
    this.#deps = {
      replaySlots: new ReplaySlots(options.maxConcurrentReplays ?? DEFAULT_MAX_CONCURRENT_REPLAYS),
      ...deps,
    };
  }

  /**
   * Start one subscriber per rank. Throws (before opening anything) on a duplicate
   * worker id, a bad rank count, or endpoints without a port to offset.
   */
  add(config: WorkerStreamConfig): WorkerKey[] {
    if (this.#closed) throw new Error("SubscriberPool is closed");
    if (this.#workers.has(config.workerId)) {
      throw new Error(`worker ${config.workerId} already has event subscribers`);
    }
    const n = config.dataParallelSize;
    if (!Number.isInteger(n) || n < 1) {
      throw new RangeError(
        `dataParallelSize of ${config.workerId} must be an integer ≥ 1, got ${n}`,
      );
    }
    const streams = Array.from({ length: n }, (_, rank) => ({
      worker: workerKey(config.workerId, rank),
      endpoint: endpointForRank(config.eventsEndpoint, rank),
      replayEndpoint:
        config.replayEndpoint === null ? null : endpointForRank(config.replayEndpoint, rank),
    }));
    const subscribers = streams.map(
      (s) =>
        new KvEventSubscriber(
          {
            ...this.#options,
            ...s,
            topic: config.topic,
            format: config.format,
            ...this.#takeResume(s.worker, s.replayEndpoint),
          },
          this.#index,
          this.#deps,
        ),
    );
    this.#workers.set(config.workerId, subscribers);
    return streams.map((s) => s.worker);
  }

  /** Close a worker's subscribers and forget its blocks. False if it was not there. */
  async remove(workerId: string): Promise<boolean> {
    const subscribers = this.#workers.get(workerId);
    if (subscribers === undefined) return false;
    this.#workers.delete(workerId);
    const closing = Promise.all(subscribers.map((s) => s.close()));
    // close() stops applying at once: drop the entries now, before an `add` of the same
    // id (possible while we wait) can store blocks that a later removal would wipe.
    for (const s of subscribers) this.#index.removeWorker(s.worker);
    await closing;
    return true;
  }

  /**
   * Streams restored from a snapshot: each resumes (sequencer `resume`) when it is
   * added. Call before adding workers; see `unclaimedResumes`.
   */
  resumeFrom(streams: readonly SavedStream[]): void {
    this.#resume = new Map(streams.map((s) => [s.worker, s]));
  }

  /** Saved streams no added stream took (their workers are not in the fleet now); clears them. */
  unclaimedResumes(): WorkerKey[] {
    const keys = [...this.#resume.keys()];
    this.#resume.clear();
    return keys;
  }

  /** Every stream's snapshot record (streams that can be resumed, with a batch applied). */
  saved(): SavedStream[] {
    const out: SavedStream[] = [];
    for (const subscribers of this.#workers.values()) {
      for (const s of subscribers) {
        const r = s.saved();
        if (r !== null) out.push(r);
      }
    }
    return out;
  }

  #takeResume(worker: WorkerKey, replayEndpoint: string | null) {
    const r = this.#resume.get(worker);
    if (r === undefined || replayEndpoint === null) return {};
    this.#resume.delete(worker);
    return { resume: { lastSeq: r.lastSeq, lastBatch: r.lastBatch } };
  }

  has(workerId: string): boolean {
    return this.#workers.has(workerId);
  }

  /** Every stream's state, workers in insertion order, ranks ascending. */
  states(): StreamState[] {
    const out: StreamState[] = [];
    for (const subscribers of this.#workers.values()) {
      for (const s of subscribers) out.push(s.state());
    }
    return out;
  }

  /** Keys of the streams catching up now (their matches are not current). Cheap. */
  catchingUp(): Set<WorkerKey> {
    const out = new Set<WorkerKey>();
    for (const subscribers of this.#workers.values()) {
      for (const s of subscribers) if (!s.current) out.add(s.worker);
    }
    return out;
  }

  /** Close every subscriber (index entries are kept: the process is usually stopping). */
  async close(): Promise<void> {
    this.#closed = true;
    const all = [...this.#workers.values()].flat();
    this.#workers.clear();
    await Promise.all(all.map((s) => s.close()));
  }
}
