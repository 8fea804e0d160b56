/**
 * The router's own predictions: each routed request adds its uncached prefill tokens and
 * its KV blocks to the chosen worker until the caller reports the first token (prefill
 * done) and completion, or a TTL expires (callers that never report must not leak load).
 *
 * Every operation is O(1) amortised: expiry walks two FIFO queues in routing order, and
 * the "routed at or after time t" totals used by the combining rule (`effective-load.ts`) are
 * running sums per worker: all entries, minus those routed before t. When t (the
 * snapshot time) moves, only the entries it crosses are visited, in each worker's
 * routing-order queue. Times are made non-decreasing (`addedMs` never goes below an
 * earlier entry's), so that queue is sorted by time.
 */

import type { WorkerKey } from "../protocol/worker.js";
import { Fifo } from "../util/fifo.js";
import { RunningTotals, ZERO_TOTALS } from "./in-flight-totals.js";
import { advance, compactQueue, moveTo, type SinceQueue, type TimedEntry } from "./since-cursor.js";
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
  /**
   * The prompt's chained block keys, two words per block (`index/block-key.ts`): two
   * prompts share their first n blocks exactly when their keys at block n − 1 are equal.
   * Kept (by reference, not copied) while the prefill is pending, for `pendingSharing`.
   */
  readonly prefixKeys?: Uint32Array;
}

interface Entry extends TimedEntry {
  readonly id: string;
  readonly worker: WorkerKey;
  /** The prompt's block keys while its prefill is pending; null after (or never given). */
  prefixKeys: Uint32Array | null;
}

/** This worker's entries in routing order (dead ones until compacted) and its totals. */
interface WorkerState extends SinceQueue<Entry> {
  /** Live entries. */
  count: number;
  readonly all: RunningTotals;
  /** `all − before`, handed out by `totalsSince`. */
  readonly since: RunningTotals;
  /** `queue[0, oldest)` are dead: where `dropOldest` resumes its search. */
  oldest: number;
}

export class InFlightTracker {
  readonly #byId = new Map<string, Entry>();
  readonly #workers = new Map<WorkerKey, WorkerState>();
  /** Entries in routing order; heads already removed or reported are skipped lazily. */
  readonly #prefillQueue = new Fifo<Entry>();
  readonly #ttlQueue = new Fifo<Entry>();
  readonly prefillTtlMs: number;
  readonly ttlMs: number;
  #expiredPrefills = 0;
  #expiredRequests = 0;
  /** Latest `addedMs` given out: times never go backwards. */
  #clock = -Infinity;

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
    this.#clock = Math.max(this.#clock, input.nowMs);
    const e: Entry = {
      id: requestId,
      worker,
      addedMs: this.#clock,
      prefillTokens: Math.max(0, input.prefillTokens),
      blocks: Math.max(0, input.blocks),
      prefixKeys: input.prefixKeys ?? null,
      pending: true,
      live: true,
      before: false,
    };
    this.#byId.set(requestId, e);
    const w = this.#worker(worker);
    w.count++;
    w.all.add(e.pending, e.prefillTokens, e.blocks, 1);
    if (w.queue.length > 2 * w.count + 64) compact(w);
    w.queue.push(e);
    advance(w);
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
    return this.#workers.get(worker)?.all ?? ZERO_TOTALS;
  }

  /**
   * Totals of the requests routed to `worker` at or after `sinceMs`. A request routed in
   * the very millisecond a snapshot was taken is not known to be in it, so it counts as
   * newer: counting it twice until the next snapshot costs one request's load, while
   * taking it as seen made a whole burst routed in that millisecond vanish from an idle
   * worker (the engine confirmed none of it) and pile onto it. Cheap when `sinceMs` is
   * the same as last time (the usual case: one snapshot, many routes).
   */
  totalsSince(worker: WorkerKey, sinceMs: number): InFlightTotals {
    const w = this.#workers.get(worker);
    if (w === undefined) return ZERO_TOTALS;
    moveTo(w, sinceMs);
    return w.since.difference(w.all, w.before);
  }

  /**
   * Pending prefill tokens on `worker` of the requests whose prompt shares the first
   * `blocks` blocks of `keys` (the same chained keys as `InFlightAddInput.prefixKeys`):
   * the demand for that prefix queued on the worker. Requests recorded without keys share
   * nothing but the empty prefix (`blocks` ≤ 0: every pending token). One pass over the
   * worker's entries in flight.
   */
  pendingSharing(worker: WorkerKey, keys: Uint32Array, blocks: number): number {
    const w = this.#workers.get(worker);
    if (w === undefined) return 0;
    if (blocks <= 0) return w.all.pendingPrefillTokens;
    const at = 2 * (blocks - 1);
    if (at + 1 >= keys.length) return 0;
    const hi = keys[at]!;
    const lo = keys[at + 1]!;
    let tokens = 0;
    const q = w.queue;
    for (let i = w.oldest; i < q.length; i++) {
      const e = q[i]!;
      const k = e.prefixKeys;
      if (k === null || !e.pending || !e.live || k.length <= at + 1) continue;
      if (k[at] === hi && k[at + 1] === lo) tokens += e.prefillTokens;
    }
    return tokens;
  }

  /** Forget the oldest request of `worker` (a per-worker cap); returns its id, or null. */
  dropOldest(worker: WorkerKey): string | null {
    const w = this.#workers.get(worker);
    if (w === undefined) return null;
    // Resume after the dead prefix already walked: repeated drops at the cap stay O(1)
    // amortised instead of rescanning every entry dropped since the last compaction.
    const q = w.queue;
    while (w.oldest < q.length && !q[w.oldest]!.live) w.oldest++;
    const first = q[w.oldest];
    if (first === undefined) return null;
    this.#remove(first);
    return first.id;
  }

  /** Forget every request of a worker (it was removed); returns how many. */
  removeWorker(worker: WorkerKey): number {
    const w = this.#workers.get(worker);
    if (w === undefined) return 0;
    for (const e of w.queue) {
      if (!e.live) continue;
      e.live = false;
      e.prefixKeys = null;
      this.#byId.delete(e.id);
    }
    this.#workers.delete(worker);
    return w.count;
  }

  /** Workers with at least one request in flight. */
  workers(): WorkerKey[] {
    return [...this.#workers.keys()];
  }

  #worker(worker: WorkerKey): WorkerState {
    let w = this.#workers.get(worker);
    if (w === undefined) {
      w = {
        count: 0,
        all: new RunningTotals(),
        before: new RunningTotals(),
        since: new RunningTotals(),
        sinceMs: -Infinity,
        queue: [],
        cursor: 0,
        oldest: 0,
      };
      this.#workers.set(worker, w);
    }
    return w;
  }

  #endPrefill(e: Entry): void {
    if (!e.pending) return;
    const w = this.#workers.get(e.worker)!;
    w.all.endPrefill(e.prefillTokens);
    if (e.before) w.before.endPrefill(e.prefillTokens);
    e.pending = false;
    e.prefixKeys = null;
  }

  #remove(e: Entry): void {
    this.#byId.delete(e.id);
    const w = this.#workers.get(e.worker)!;
    w.all.add(e.pending, e.prefillTokens, e.blocks, -1);
    if (e.before) w.before.add(e.pending, e.prefillTokens, e.blocks, -1);
    e.live = false;
    e.prefixKeys = null;
    w.count--;
    if (w.count === 0) this.#workers.delete(e.worker);
  }
}

/** Drops dead entries from the queue (amortised: only when it is half dead). */
function compact(w: WorkerState): void {
  compactQueue(w);
  w.oldest = 0;
}
