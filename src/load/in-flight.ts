/**
 * The router's own predictions: each routed request adds its uncached prefill tokens and
 * its KV blocks to the chosen worker until the caller reports the first token (prefill
 * done) and completion, or a TTL expires (callers that never report must not leak load).
 *
 * Every operation is O(1) amortised: expiry walks two FIFO queues in routing order, and
 * the "routed after time t" totals used by the combining rule (`effective-load.ts`) are
 * kept incrementally per worker, recomputed only when t (the snapshot time) changes.
 */

import type { WorkerKey } from "../protocol/worker.js";
import type { InFlightAdd, InFlightTotals, InFlightUpdate } from "./types.js";

export interface InFlightConfig {
  /** After this long without a first-token report, the prefill is assumed done. */
  readonly prefillTtlMs: number;
  /** After this long the request is assumed done and forgotten. */
  readonly ttlMs: number;
}

export interface InFlightAddInput {
  /** Uncached prompt tokens the worker must compute. */
  readonly prefillTokens: number;
  /** KV blocks the request will hold while it runs. */
  readonly blocks: number;
  readonly nowMs: number;
}

interface Entry {
  readonly id: string;
  readonly worker: WorkerKey;
  readonly addedMs: number;
  readonly prefillTokens: number;
  readonly blocks: number;
  pending: boolean;
}

class Totals implements InFlightTotals {
  pendingPrefillTokens = 0;
  pendingRequests = 0;
  activeBlocks = 0;
  activeRequests = 0;

  add(e: Entry, sign: 1 | -1): void {
    if (e.pending) {
      this.pendingPrefillTokens += sign * e.prefillTokens;
      this.pendingRequests += sign;
    }
    this.activeBlocks += sign * e.blocks;
    this.activeRequests += sign;
  }

  endPrefill(e: Entry): void {
    this.pendingPrefillTokens -= e.prefillTokens;
    this.pendingRequests--;
  }
}

interface WorkerState {
  readonly entries: Set<Entry>;
  readonly all: Totals;
  /** Totals of entries added strictly after `sinceMs`. */
  since: Totals;
  sinceMs: number;
}

/** FIFO of entries in insertion order; stale heads are skipped lazily. */
class Queue {
  #items: Entry[] = [];
  #head = 0;
  push(e: Entry): void {
    this.#items.push(e);
  }
  peek(): Entry | undefined {
    return this.#items[this.#head];
  }
  shift(): void {
    this.#head++;
    if (this.#head > 1024 && this.#head * 2 > this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
  }
}

const ZERO: InFlightTotals = Object.freeze({
  pendingPrefillTokens: 0,
  pendingRequests: 0,
  activeBlocks: 0,
  activeRequests: 0,
});

export class InFlightTracker {
  readonly #byId = new Map<string, Entry>();
  readonly #workers = new Map<WorkerKey, WorkerState>();
  readonly #prefillQueue = new Queue();
  readonly #ttlQueue = new Queue();
  readonly prefillTtlMs: number;
  readonly ttlMs: number;
  #expiredPrefills = 0;
  #expiredRequests = 0;

  constructor(config: InFlightConfig) {
    if (!(config.ttlMs > 0)) throw new RangeError("ttlMs must be > 0");
    if (!(config.prefillTtlMs > 0 && config.prefillTtlMs <= config.ttlMs)) {
      throw new RangeError("prefillTtlMs must be > 0 and ≤ ttlMs");
    }
    this.prefillTtlMs = config.prefillTtlMs;
    this.ttlMs = config.ttlMs;
  }

  /** Number of requests in flight. */
  get size(): number {
    return this.#byId.size;
  }

  /** Requests whose prefill / whole life was ended by TTL rather than a report. */
  get expired(): { readonly prefills: number; readonly requests: number } {
    return { prefills: this.#expiredPrefills, requests: this.#expiredRequests };
  }

  has(requestId: string): boolean {
    return this.#byId.has(requestId);
  }

  /** Record a routed request on `worker`. A request id already in flight is refused. */
  add(requestId: string, worker: WorkerKey, input: InFlightAddInput): InFlightAdd {
    if (this.#byId.has(requestId)) return { ok: false, reason: "duplicate_request", requestId };
    const e: Entry = {
      id: requestId,
      worker,
      addedMs: input.nowMs,
      prefillTokens: Math.max(0, input.prefillTokens),
      blocks: Math.max(0, input.blocks),
      pending: true,
    };
    this.#byId.set(requestId, e);
    const w = this.#worker(worker);
    w.entries.add(e);
    w.all.add(e, 1);
    if (e.addedMs > w.sinceMs) w.since.add(e, 1);
    this.#prefillQueue.push(e);
    this.#ttlQueue.push(e);
    return { ok: true };
  }

  /** The request produced its first token: its prefill no longer loads the worker. */
  firstToken(requestId: string, _nowMs: number): InFlightUpdate {
    const e = this.#byId.get(requestId);
    if (e === undefined) return { ok: false, reason: "unknown_request", requestId };
    this.#endPrefill(e);
    return { ok: true, worker: e.worker, requestId };
  }

  /** The request finished (or failed): forget it. */
  done(requestId: string, _nowMs: number): InFlightUpdate {
    const e = this.#byId.get(requestId);
    if (e === undefined) return { ok: false, reason: "unknown_request", requestId };
    this.#remove(e);
    return { ok: true, worker: e.worker, requestId };
  }

  /** Apply TTLs at `nowMs`; returns how many requests were forgotten. */
  expire(nowMs: number): number {
    for (let e = this.#prefillQueue.peek(); e !== undefined; e = this.#prefillQueue.peek()) {
      if (e.addedMs + this.prefillTtlMs > nowMs) break;
      this.#prefillQueue.shift();
      if (e.pending && this.#byId.get(e.id) === e) {
        this.#endPrefill(e);
        this.#expiredPrefills++;
      }
    }
    let removed = 0;
    for (let e = this.#ttlQueue.peek(); e !== undefined; e = this.#ttlQueue.peek()) {
      if (e.addedMs + this.ttlMs > nowMs) break;
      this.#ttlQueue.shift();
      if (this.#byId.get(e.id) === e) {
        this.#remove(e);
        removed++;
      }
    }
    this.#expiredRequests += removed;
    return removed;
  }

  /** Totals of every in-flight request on `worker`. The object is live: read, don't keep. */
  totals(worker: WorkerKey): InFlightTotals {
    return this.#workers.get(worker)?.all ?? ZERO;
  }

  /**
   * Totals of the requests routed to `worker` strictly after `sinceMs`. Cheap when
   * `sinceMs` is the same as last time (the usual case: one snapshot, many routes).
   */
  totalsSince(worker: WorkerKey, sinceMs: number): InFlightTotals {
    const w = this.#workers.get(worker);
    if (w === undefined) return ZERO;
    if (w.sinceMs !== sinceMs) {
      const t = new Totals();
      for (const e of w.entries) if (e.addedMs > sinceMs) t.add(e, 1);
      w.since = t;
      w.sinceMs = sinceMs;
    }
    return w.since;
  }

  /** Forget the oldest request of `worker` (a per-worker cap); returns its id, or null. */
  dropOldest(worker: WorkerKey): string | null {
    const first = this.#workers.get(worker)?.entries.values().next().value;
    if (first === undefined) return null;
    this.#remove(first);
    return first.id;
  }

  /** Forget every request of a worker (it was removed); returns how many. */
  removeWorker(worker: WorkerKey): number {
    const w = this.#workers.get(worker);
    if (w === undefined) return 0;
    for (const e of w.entries) this.#byId.delete(e.id);
    this.#workers.delete(worker);
    return w.entries.size;
  }

  /** Workers with at least one request in flight. */
  workers(): WorkerKey[] {
    return [...this.#workers.keys()];
  }

  #worker(worker: WorkerKey): WorkerState {
    let w = this.#workers.get(worker);
    if (w === undefined) {
      w = { entries: new Set(), all: new Totals(), since: new Totals(), sinceMs: -Infinity };
      this.#workers.set(worker, w);
    }
    return w;
  }

  #endPrefill(e: Entry): void {
    if (!e.pending) return;
    const w = this.#workers.get(e.worker)!;
    w.all.endPrefill(e);
    if (e.addedMs > w.sinceMs) w.since.endPrefill(e);
    e.pending = false;
  }

  #remove(e: Entry): void {
    this.#byId.delete(e.id);
    const w = this.#workers.get(e.worker)!;
    w.all.add(e, -1);
    if (e.addedMs > w.sinceMs) w.since.add(e, -1);
    w.entries.delete(e);
    if (w.entries.size === 0) this.#workers.delete(e.worker);
  }
}
