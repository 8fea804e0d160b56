/**
 * Predicted blocks: what the router itself believes a worker holds because it sent the
 * worker a request, before (or instead of) the engine's `BlockStored` events saying so.
 *
 * Two uses share this one structure (docs/prediction.md):
 * - predict-on-route: every routed request's full blocks count as held by the chosen
 *   worker for `ttlMs` (2 s by default, as llm-d's speculative indexing and Dynamo's
 *   `--router-predicted-ttl-secs`), closing the window between routing and the event;
 * - degraded mode: while a worker's event stream is broken, its entries live for the
 *   longer `degradedTtlMs`, capped at the worker's KV capacity, and form the approximate
 *   view the router routes that worker by. Leaving degraded mode drops them all.
 *
 * Keyed by the router's chained block keys (`computeBlockKeys`): key i names the whole
 * prefix 0..i, so a worker's predicted overlap is the count of leading keys it holds.
 * Per worker a Map in recency order (re-recording a key moves it to the end) gives
 * O(1) record/lookup, oldest-first eviction at the cap (counted), and expiry by walking
 * from the front. Lookups check the expiry too, so an entry never counts past its TTL,
 * whenever the sweep last ran. Core rules: no I/O, time passed in.
 */

import type { BlockKeySeq } from "../index/types.js";
import type { WorkerKey } from "../protocol/worker.js";

export interface PredictedBlocksOptions {
  /** Lifetime of a predicted block on a healthy worker (ms). */
  readonly ttlMs: number;
  /** Most predicted blocks kept per healthy worker; past it the oldest go (counted). */
  readonly maxBlocksPerWorker: number;
  /** Lifetime of an entry while the worker is degraded (ms). */
  readonly degradedTtlMs: number;
}

interface Entry {
  /** The key's low word (the Map key holds hi and 21 bits of lo; this confirms the rest). */
  readonly lo: number;
  expiresAtMs: number;
}

interface WorkerState {
  readonly entries: Map<number, Entry>;
  degraded: boolean;
  /** Cap while degraded: the worker's KV capacity in blocks. */
  degradedCap: number;
  /** Requests recorded for this worker (monotone; the stream health check reads it). */
  routed: number;
}

/** 53-bit map key of block key i: hi (32 bits) and the top 21 bits of lo. */
function mapKey(keys: BlockKeySeq, i: number): number {
  return keys[2 * i]! * 0x200000 + (keys[2 * i + 1]! >>> 11);
}

export interface PredictedStats {
  /** Predicted blocks held now, summed over workers (expired ones not yet swept included). */
  readonly blocks: number;
  /** Blocks dropped at a worker's cap before their TTL (oldest first). */
  readonly evicted: number;
  /** Blocks dropped because the engine's events confirmed them (the index covers them). */
  readonly confirmed: number;
  /** Blocks dropped because their TTL passed. */
  readonly expired: number;
  readonly degradedWorkers: number;
}

export class PredictedBlocks {
  readonly #o: PredictedBlocksOptions;
  readonly #workers = new Map<WorkerKey, WorkerState>();
  #evicted = 0;
  #confirmed = 0;
  #expired = 0;

  constructor(o: PredictedBlocksOptions) {
    for (const [name, v] of [
      ["ttlMs", o.ttlMs],
      ["degradedTtlMs", o.degradedTtlMs],
      ["maxBlocksPerWorker", o.maxBlocksPerWorker],
    ] as const) {
      if (!(Number.isFinite(v) && v >= 0)) throw new RangeError(`${name} must be ≥ 0, got ${v}`);
    }
    this.#o = o;
  }

  get ttlMs(): number {
    return this.#o.ttlMs;
  }

  /**
   * Record that `worker` was sent a prompt with these keys at `nowMs`: every key counts as
   * held until its TTL passes. A TTL of 0 on a healthy worker records nothing.
   */
  record(worker: WorkerKey, keys: BlockKeySeq, nowMs: number): void {
    const s = this.#state(worker);
    s.routed++;
    const ttl = s.degraded ? this.#o.degradedTtlMs : this.#o.ttlMs;
    const cap = s.degraded ? s.degradedCap : this.#o.maxBlocksPerWorker;
    if (ttl <= 0 || cap <= 0) return;
    const n = keys.length >>> 1;
    const expiresAtMs = nowMs + ttl;
    const m = s.entries;
    for (let i = 0; i < n; i++) {
      const k = mapKey(keys, i);
      const lo = keys[2 * i + 1]!;
      const e = m.get(k);
      if (e !== undefined) m.delete(k); // re-inserted at the end: the youngest
      if (e !== undefined && e.lo === lo) {
        e.expiresAtMs = expiresAtMs;
        m.set(k, e);
      } else {
        m.set(k, { lo, expiresAtMs });
      }
    }
    this.#sweep(s, nowMs);
    if (m.size > cap) {
      let over = m.size - cap;
      this.#evicted += over;
      for (const k of m.keys()) {
        if (over-- <= 0) break;
        m.delete(k);
      }
    }
  }

  /**
   * Leading keys of `keys` each worker holds as predicted and unexpired at `nowMs`
   * (workers with none are absent). Expired entries met here are dropped.
   */
  match(keys: BlockKeySeq, nowMs: number): Map<WorkerKey, number> {
    const out = new Map<WorkerKey, number>();
    const n = keys.length >>> 1;
    if (n === 0) return out;
    for (const [worker, s] of this.#workers) {
      const m = s.entries;
      if (m.size === 0) continue;
      let i = 0;
      for (; i < n; i++) {
        const e = m.get(mapKey(keys, i));
        if (e === undefined || e.lo !== keys[2 * i + 1]) break;
        if (e.expiresAtMs <= nowMs) {
          this.#sweep(s, nowMs);
          break;
        }
      }
      if (i > 0) out.set(worker, i);
    }
    return out;
  }

  /**
   * The engine confirmed the first `count` keys on `worker` (the index holds them):
   * confirmed entries replace predicted ones, so the predictions go. Degraded workers keep
   * theirs (their index may lose entries again; the approximate view stays whole).
   */
  confirm(worker: WorkerKey, keys: BlockKeySeq, count: number): void {
    const s = this.#workers.get(worker);
    if (s === undefined || s.degraded || s.entries.size === 0) return;
    const n = Math.min(count, keys.length >>> 1);
    for (let i = 0; i < n; i++) {
      const k = mapKey(keys, i);
      const e = s.entries.get(k);
      if (e !== undefined && e.lo === keys[2 * i + 1] && s.entries.delete(k)) this.#confirmed++;
    }
  }

  /**
   * Enter degraded mode for `worker`: entries recorded from now on live `degradedTtlMs`,
   * up to `capacityBlocks` of them (the engine cannot hold more).
   */
  setDegraded(worker: WorkerKey, capacityBlocks: number): void {
    const s = this.#state(worker);
    s.degraded = true;
    s.degradedCap = Math.max(0, Math.floor(capacityBlocks));
  }

  /**
   * Back to precise routing for `worker`: the approximate entries are dropped (none of
   * them may outlive the stream's return to health as a false positive).
   */
  setHealthy(worker: WorkerKey): void {
    const s = this.#workers.get(worker);
    if (s === undefined || !s.degraded) return;
    s.degraded = false;
    s.entries.clear();
  }

  isDegraded(worker: WorkerKey): boolean {
    return this.#workers.get(worker)?.degraded === true;
  }

  /** Count a request routed to `worker` with nothing to predict (the index holds it all). */
  noteRouted(worker: WorkerKey): void {
    this.#state(worker).routed++;
  }

  /** Requests recorded for `worker` so far (monotone; 0 for an unknown worker). */
  routed(worker: WorkerKey): number {
    return this.#workers.get(worker)?.routed ?? 0;
  }

  /** The worker's engine emptied its cache: its predictions go (its route count stays). */
  clearWorker(worker: WorkerKey): void {
    this.#workers.get(worker)?.entries.clear();
  }

  /** A worker removed: its predictions, degraded flag and route count go. */
  removeWorker(worker: WorkerKey): void {
    this.#workers.delete(worker);
  }

  /** Workers with any state here (predictions, a degraded flag or a route count). */
  workers(): WorkerKey[] {
    return [...this.#workers.keys()];
  }

  /** Drop expired entries everywhere (callers may run it periodically; lookups also check). */
  expire(nowMs: number): void {
    for (const s of this.#workers.values()) this.#sweep(s, nowMs);
  }

  /** Predicted blocks `worker` holds now (unswept expired ones included). */
  size(worker: WorkerKey): number {
    return this.#workers.get(worker)?.entries.size ?? 0;
  }

  stats(): PredictedStats {
    let blocks = 0;
    let degradedWorkers = 0;
    for (const s of this.#workers.values()) {
      blocks += s.entries.size;
      if (s.degraded) degradedWorkers++;
    }
    return {
      blocks,
      evicted: this.#evicted,
      confirmed: this.#confirmed,
      expired: this.#expired,
      degradedWorkers,
    };
  }

  #state(worker: WorkerKey): WorkerState {
    let s = this.#workers.get(worker);
    if (s === undefined) {
      s = { entries: new Map(), degraded: false, degradedCap: 0, routed: 0 };
      this.#workers.set(worker, s);
    }
    return s;
  }

  /**
   * Drop expired entries from the front. Recency order is expiry order while a worker's
   * TTL does not shrink (healthy → degraded only lengthens it; degraded → healthy clears),
   * so the walk stops at the first live entry.
   */
  #sweep(s: WorkerState, nowMs: number): void {
    const m = s.entries;
    for (const [k, e] of m) {
      if (e.expiresAtMs > nowMs) break;
      m.delete(k);
      this.#expired++;
    }
  }
}
