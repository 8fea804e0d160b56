/**
 * The router's own predictions: each routed request adds its uncached prefill tokens and
 * its KV blocks to the chosen worker until the caller reports the first token (prefill
 * done) and completion, or a TTL expires (callers that never report must not leak load).
 *
 * Every operation is O(1) amortised: expiry walks two FIFO queues in routing order, and
 * the "routed at or after time t" totals used by the combining rule (`effective-load.ts`)
 * are running sums per worker (`TimedTotals`, `since-cursor.ts`): all entries, minus
 * those routed before t. When t (the snapshot time) moves, only the entries it crosses
 * are visited. Times are made non-decreasing (`addedMs` never goes below an earlier
 * entry's), so each worker's queue is in time order as it is appended. A worker's state
 * stays (emptied) when its last request ends, so `handle` can give out a live reference
 * that only `removeWorker` invalidates (`removals`).
 */

import type { WorkerKey } from "../protocol/worker.js";
import { Fifo } from "../util/fifo.js";
import { ZERO_TOTALS } from "./in-flight-totals.js";
import { pendingSharingIn, type TimedEntry, TimedTotals } from "./since-cursor.js";
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
  /** The stamp of what predict-on-route recorded for it (`PredictedBlocks.record`; 0: none). */
  predictionStamp: number;
}

const entryKeys = (e: Entry): Uint32Array | null => e.prefixKeys;

/** A worker's entries in routing order and their totals. */
type WorkerState = TimedTotals<Entry>;

/** What `InFlightTracker.handle` gives out: one worker's live totals, read only. */
export interface InFlightHandle {
  readonly all: InFlightTotals;
  since(sinceMs: number): InFlightTotals;
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
  /** Per worker, the latest first-token report of a request still in prefill. */
  readonly #lastFirstTokenMs = new Map<WorkerKey, number>();
  /** Bumped whenever a worker's state is dropped (`removeWorker`): handles go stale. */
  #removals = 0;
  /** Sets that collect the keys of workers whose totals changed (`watch`). */
  readonly #watchers: Set<WorkerKey>[] = [];

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

  /** What predict-on-route recorded for `requestId` (its `PredictedBlocks.record` stamp). */
  notePrediction(requestId: string, stamp: number): void {
    const e = this.#byId.get(requestId);
    if (e !== undefined) e.predictionStamp = stamp;
  }

  /**
   * The prediction of a request still in prefill, once (its stamp is cleared): its worker,
   * keys and stamp; null when it is not in prefill, gave no keys or recorded nothing.
   */
  takePendingPrediction(
    requestId: string,
  ): { readonly worker: WorkerKey; readonly keys: Uint32Array; readonly stamp: number } | null {
    const e = this.#byId.get(requestId);
    if (e === undefined || !e.pending || e.prefixKeys === null || e.predictionStamp === 0) {
      return null;
    }
    const stamp = e.predictionStamp;
    e.predictionStamp = 0;
    return { worker: e.worker, keys: e.prefixKeys, stamp };
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
      predictionStamp: 0,
      pending: true,
      live: true,
      before: false,
    };
    this.#byId.set(requestId, e);
    this.#worker(worker).add(e);
    this.#changed(worker);
    this.#prefillQueue.push(e);
    this.#ttlQueue.push(e);
    return { ok: true };
  }

  /** The request produced its first token: its prefill no longer loads the worker. */
  firstToken(requestId: string, nowMs: number): InFlightUpdate {
    const e = this.#byId.get(requestId);
    if (e === undefined) return { ok: false, reason: "unknown_request", requestId };
    if (e.pending) {
      const last = this.#lastFirstTokenMs.get(e.worker) ?? Number.NEGATIVE_INFINITY;
      if (nowMs > last) this.#lastFirstTokenMs.set(e.worker, nowMs);
    }
    this.#endPrefill(e);
    return { ok: true, worker: e.worker, requestId };
  }

  /**
   * How much of the prefill in progress on `worker` is done by `nowMs`, for a worker that
   * computes `tokensPerSec` uncached tokens a second after `overheadMs` per request, one
   * prompt at a time, in the order routed (vLLM's FCFS waiting queue): the oldest request
   * still in prefill started at the later of its routing and the worker's last first
   * token, and has computed (now − start − overhead) × rate of its tokens since (at most
   * all of them). null: nothing pending.
   * `routedMs` is that request's routing time (the combining rule needs to know whether
   * the engine's snapshot could have seen it). An estimate: a request that waited for a
   * running slot or KV blocks started later than this says.
   */
  prefillProgress(
    worker: WorkerKey,
    nowMs: number,
    tokensPerSec: number,
    overheadMs = 0,
  ): { readonly tokens: number; readonly routedMs: number } | null {
    const head = this.#workers.get(worker)?.oldestPending();
    if (head === undefined) return null;
    const start = Math.max(
      head.addedMs,
      this.#lastFirstTokenMs.get(worker) ?? Number.NEGATIVE_INFINITY,
    );
    const done = ((nowMs - start - overheadMs) * tokensPerSec) / 1000;
    return { tokens: Math.max(0, Math.min(head.prefillTokens, done)), routedMs: head.addedMs };
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
    return w === undefined ? ZERO_TOTALS : w.since(sinceMs);
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
    return w === undefined ? 0 : pendingSharingIn(w, keys, blocks, entryKeys);
  }

  /** Forget the oldest request of `worker` (a per-worker cap); returns its id, or null. */
  dropOldest(worker: WorkerKey): string | null {
    const w = this.#workers.get(worker);
    if (w === undefined) return null;
    // O(1) amortised at the cap: the walk resumes after the dead prefix already passed.
    const first = w.oldestLive();
    if (first === undefined) return null;
    this.#remove(first);
    return first.id;
  }

  /** Forget every request of a worker (it was removed); returns how many. */
  removeWorker(worker: WorkerKey): number {
    const w = this.#workers.get(worker);
    if (w === undefined) return 0;
    for (const e of w.live()) {
      e.live = false;
      e.prefixKeys = null;
      this.#byId.delete(e.id);
    }
    this.#workers.delete(worker);
    this.#lastFirstTokenMs.delete(worker);
    this.#removals++;
    this.#changed(worker);
    return w.count;
  }

  /** Workers with at least one request in flight. */
  workers(): WorkerKey[] {
    const out: WorkerKey[] = [];
    for (const [key, w] of this.#workers) if (w.count > 0) out.push(key);
    return out;
  }

  /**
   * Changes whenever a worker's state is dropped (`removeWorker`): a `handle` taken before
   * a change may be stale, one taken since is live. Nothing else drops a state (a worker
   * whose requests all finished keeps its empty one), so a decision over thousands of
   * workers can read each one's totals without a lookup by key (`router-columns.ts`).
   */
  get removals(): number {
    return this.#removals;
  }

  /**
   * From now on, add to `into` the key of every worker whose totals change (the owner
   * empties it as it reads): a decision over thousands of workers recomputes only
   * theirs (`router-columns.ts`).
   */
  watch(into: Set<WorkerKey>): void {
    this.#watchers.push(into);
  }

  /**
   * The live totals of `worker` (created empty if it has none): `all` and `since(t)` are
   * `totals` and `totalsSince`. Read only; valid while `removals` is unchanged.
   */
  handle(worker: WorkerKey): InFlightHandle {
    return this.#worker(worker);
  }

  #worker(worker: WorkerKey): WorkerState {
    let w = this.#workers.get(worker);
    if (w === undefined) {
      w = new TimedTotals<Entry>();
      this.#workers.set(worker, w);
    }
    return w;
  }

  #endPrefill(e: Entry): void {
    this.#workers.get(e.worker)!.endPrefill(e);
    e.prefixKeys = null;
    this.#changed(e.worker);
  }

  #changed(worker: WorkerKey): void {
    for (const w of this.#watchers) w.add(worker);
  }

  #remove(e: Entry): void {
    this.#byId.delete(e.id);
    const w = this.#workers.get(e.worker)!;
    w.remove(e);
    e.prefixKeys = null;
    // Kept for its handle, emptied to exactly a new state (no dead entries held).
    w.resetIfEmpty();
    this.#changed(e.worker);
  }
}
