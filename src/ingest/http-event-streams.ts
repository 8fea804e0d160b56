/**
 * KV event streams pushed over HTTP (`POST /v1/workers/:id/events`), for engines that
 * cannot speak ZeroMQ. One stream per (worker, dp rank), under the same rules as a
 * ZeroMQ stream without a replay endpoint, decided by the same pure `Sequencer`:
 * batches apply in `event_id` order; a skipped id cannot be replayed, so the worker is
 * cleared (`unfilled_gap`, counted) and the batch applied on top; a lower id is an
 * engine restart (cleared, `restart`); the last batch sent again (a client retry: same
 * id, same events) is a duplicate, dropped. Only the last: an older id with the same
 * events is as likely a restarted engine repeating its first batches (a deterministic
 * warm-up), and taking it for a retry would keep the old process's later blocks. Each batch arrives already encoded as vLLM's bytes
 * (the route transcodes the JSON), so decoding and applying are the ZeroMQ path's own.
 *
 * A stream belongs to one registration of its worker: when the fleet's entry for the id
 * is another object (the worker was removed and added again), the stream starts fresh.
 */

import type { PrefixIndex } from "../index/types.js";
import { type WorkerKey, workerKey } from "../protocol/worker.js";
import type { LogSink } from "../util/log-sink.js";
import { type ApplyTarget, applyBatch, problemLog } from "./batch-apply.js";
import { createStreamDecoder, type StreamDecoder } from "./batch-decoder.js";
import { Sequencer } from "./sequencer.js";
import { type ResetReason, StreamCounters, type StreamState } from "./stream-state.js";

/** What one pushed batch did. */
export interface PushOutcome {
  readonly worker: WorkerKey;
  /** `applied`, or `duplicate` (the same batch was already applied: nothing changed). */
  readonly outcome: "applied" | "duplicate";
  /** Set when the worker's index entries were cleared before this batch applied. */
  readonly reset: ResetReason | null;
  /** Event ids skipped before this batch (a gap), or null. */
  readonly gap: { readonly from: bigint; readonly to: bigint } | null;
  readonly lastEventId: bigint | null;
}

interface Stream {
  readonly owner: object;
  readonly key: WorkerKey;
  readonly sequencer: Sequencer<Uint8Array>;
  readonly counters: StreamCounters;
  readonly decoder: StreamDecoder;
  readonly target: ApplyTarget;
  /** Digest of the events of batch `sequencer.lastSeq` (a retry repeats it), or null. */
  lastDigest: string | null;
}

export interface HttpEventStreamsDeps {
  readonly index: PrefixIndex;
  readonly log: LogSink;
  readonly nowMs: () => number;
  /** The fleet's current entry for a worker id (identity decides whether a stream is stale). */
  readonly owner: (workerId: string) => object | undefined;
}

export class HttpEventStreams {
  readonly #d: HttpEventStreamsDeps;
  readonly #streams = new Map<WorkerKey, Stream>();

  constructor(deps: HttpEventStreamsDeps) {
    this.#d = deps;
  }

  /**
   * Apply one batch pushed for `workerId` rank `dpRank`: `payload` is its vLLM encoding,
   * `digest` identifies its content (a retry has the same one).
   */
  push(
    workerId: string,
    dpRank: number,
    eventId: bigint,
    payload: Uint8Array,
    digest: string,
  ): PushOutcome {
    const s = this.#stream(workerId, dpRank);
    const c = s.counters;
    c.connected = true;
    c.lastEventTimeMs = this.#d.nowMs();
    const last = s.sequencer.lastSeq;
    if (last !== null && eventId === last && s.lastDigest === digest) {
      c.duplicates++;
      return { worker: s.key, outcome: "duplicate", reset: null, gap: null, lastEventId: last };
    }
    let reset: ResetReason | null = null;
    let gap: PushOutcome["gap"] = null;
    for (const a of s.sequencer.live(eventId, payload)) {
      switch (a.kind) {
        case "apply":
          c.batches++;
          c.lastSeq = a.seq;
          applyBatch(s.target, a.seq, a.payload, null);
          break;
        case "reset":
          this.#d.index.removeWorker(s.key);
          s.decoder.reset();
          c.resets[a.reason]++;
          reset ??= a.reason;
          this.#d.log[a.reason === "startup_hole" ? "info" : "warn"](
            { worker: s.key, reason: a.reason, detail: a.detail, transport: "http" },
            "kv events stream reset, worker cleared",
          );
          break;
        case "gap":
          c.gaps++;
          gap = { from: a.from, to: a.seen - 1n };
          break;
        case "duplicate":
          c.duplicates++;
          break;
        case "status":
          c.current = a.current;
          break;
        case "replay":
        case "mismatch":
          // Unreachable: the sequencer is built without a replay endpoint.
          throw new Error(`http event stream: unexpected ${a.kind}`);
      }
    }
    s.lastDigest = digest;
    return {
      worker: s.key,
      outcome: "applied",
      reset,
      gap,
      lastEventId: s.sequencer.lastSeq,
    };
  }

  /** Snapshots of the streams of workers still registered (as in the same registration). */
  states(): StreamState[] {
    const out: StreamState[] = [];
    for (const [key, s] of this.#streams) {
      const id = key.slice(0, key.lastIndexOf("#"));
      if (this.#d.owner(id) !== s.owner) {
        this.#streams.delete(key);
        continue;
      }
      out.push(
        s.counters.snapshot({
          worker: key,
          endpoint: "http",
          replayEndpoint: null,
          topic: "",
          format: "vllm",
        }),
      );
    }
    return out;
  }

  #stream(workerId: string, dpRank: number): Stream {
    const key = workerKey(workerId, dpRank);
    const owner = this.#d.owner(workerId);
    if (owner === undefined) throw new Error(`no worker ${workerId}`);
    const known = this.#streams.get(key);
    if (known !== undefined && known.owner === owner) return known;
    const counters = new StreamCounters();
    const decoder = createStreamDecoder("vllm");
    const problem = problemLog(this.#d.log, key);
    const stream: Stream = {
      owner,
      key,
      sequencer: new Sequencer<Uint8Array>({
        firstSeq: 0n,
        hasReplay: false,
        same: (a, b) => Buffer.compare(a, b) === 0,
      }),
      counters,
      decoder,
      target: { worker: key, dpRank, index: this.#d.index, decoder, counters, problem },
      lastDigest: null,
    };
    this.#streams.set(key, stream);
    return stream;
  }
}
