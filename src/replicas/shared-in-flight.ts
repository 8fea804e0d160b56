/**
 * The in-flight tracker of a replica that shares its load: the same bookkeeping as
 * `InFlightTracker` (the router and the HTTP routes use it unchanged), and every change
 * that other replicas must know of is told to a listener (the Redis sync), synchronously
 * and without waiting for anything: the listener only queues.
 */

import { type InFlightAddInput, type InFlightConfig, InFlightTracker } from "../load/in-flight.js";
import type { InFlightAdd, InFlightUpdate } from "../load/types.js";
import type { WorkerKey } from "../protocol/worker.js";
import type { SharedEntry } from "./wire.js";

/** What the tracker reports; implemented by `RedisLoadSync`. */
export interface InFlightListener {
  added(entry: SharedEntry): void;
  firstToken(requestId: string): void;
  done(requestId: string): void;
  workerRemoved(worker: WorkerKey): void;
}

export class SharedInFlightTracker extends InFlightTracker {
  readonly #listener: InFlightListener;

  constructor(config: InFlightConfig, listener: InFlightListener) {
    super(config);
    this.#listener = listener;
  }

  override add(requestId: string, worker: WorkerKey, input: InFlightAddInput): InFlightAdd {
    const r = super.add(requestId, worker, input);
    if (r.ok) {
      this.#listener.added({
        id: requestId,
        worker,
        prefillTokens: Math.max(0, input.prefillTokens),
        blocks: Math.max(0, input.blocks),
        addedMs: input.nowMs,
        prefillEndMs: input.nowMs + this.prefillTtlMs,
        expiresMs: input.nowMs + this.ttlMs,
        pending: true,
        ...(input.prefixKeys === undefined ? {} : { prefixKeys: input.prefixKeys }),
      });
    }
    return r;
  }

  override firstToken(requestId: string, nowMs: number): InFlightUpdate {
    const r = super.firstToken(requestId, nowMs);
    if (r.ok) this.#listener.firstToken(requestId);
    return r;
  }

  override done(requestId: string, nowMs: number): InFlightUpdate {
    const r = super.done(requestId, nowMs);
    if (r.ok) this.#listener.done(requestId);
    return r;
  }

  /**
   * The router's per-worker cap forgets the oldest request to make room: it no longer
   * counts here, so it must stop counting at the peers too (it is told as done).
   */
  override dropOldest(worker: WorkerKey): string | null {
    const id = super.dropOldest(worker);
    if (id !== null) this.#listener.done(id);
    return id;
  }

  override removeWorker(worker: WorkerKey): number {
    const n = super.removeWorker(worker);
    this.#listener.workerRemoved(worker);
    return n;
  }
}
