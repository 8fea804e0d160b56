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
 * Per worker a table of entries (`block-table.ts`, exact on both words of a key) and a
 * queue of them in recency order (re-recording a key pushes its entry again and updates
 * it in place) give O(1) record/lookup, oldest-first
 * eviction at the cap (counted), and expiry by walking from the front. Lookups check the
 * expiry too, so an entry never counts past its TTL, whenever the sweep last ran. A
 * confirmed entry is marked dead rather than deleted, so the record that usually follows
 * (the same prompt routed again) revives it instead of inserting it anew: on the gateway
 * the Map's deletes and inserts were ~15 % of the event loop. Core rules: no I/O, time
 * passed in.
 *
 * Long file: the recency queue (push, pop, compaction) is only sound together with the
 * entries it orders and the methods that mark, revive and sweep them.
 */

import type { BlockKeySeq } from "../index/types.js";
import type { WorkerKey } from "../protocol/worker.js";
import { BlockTable, type TableEntry } from "./block-table.js";

export interface PredictedBlocksOptions {
  /** Lifetime of a predicted block on a healthy worker (ms). */
  readonly ttlMs: number;
  /** Most predicted blocks kept per healthy worker; past it the oldest go (counted). */
  readonly maxBlocksPerWorker: number;
  /** Lifetime of an entry while the worker is degraded (ms). */
  readonly degradedTtlMs: number;
}

interface Entry extends TableEntry {
  expiresAtMs: number;
  /** Index of the entry's latest place in its worker's recency queue. */
  at: number;
  /** Confirmed by the engine (or withdrawn): counts as absent until recorded again or swept. */
  dead: boolean;
  /** The `record` call that last recorded it (`withdraw` takes back only that call's). */
  stamp: number;
}

interface WorkerState {
  readonly entries: BlockTable<Entry>;
  /**
   * Recency order: the entries in the order they were last recorded, oldest first
   * (`head`..`tail`). An entry re-recorded is pushed again and points at its new place;
   * the old place is stale and skipped. Keeps a re-recorded entry in place in the map (no
   * delete and insert per block: the cost of predict-on-route on the gateway), and the
   * queue holds the entries themselves, so walking it looks nothing up.
   */
  queue: (Entry | undefined)[];
  head: number;
  tail: number;
  /** Entries not dead. */
  live: number;
  degraded: boolean;
  /** Cap while degraded: the worker's KV capacity in blocks. */
  degradedCap: number;
  /** Requests recorded for this worker (monotone; the stream health check reads it). */
  routed: number;
}

export interface PredictedStats {
  /** Predicted blocks held now, summed over workers (expired ones not yet swept included). */
  readonly blocks: number;
  /** Blocks dropped at a worker's cap before their TTL (oldest first). */
  readonly evicted: number;
  /**
   * Blocks dropped because the engine's events confirmed them (the index covers them), or
   * removed them from its GPU (`removed`).
   */
  readonly confirmed: number;
  /** Blocks dropped because their TTL passed. */
  readonly expired: number;
  /** Blocks taken back because the request recorded them never reached the engine. */
  readonly withdrawn: number;
  readonly degradedWorkers: number;
}

export class PredictedBlocks {
  readonly #o: PredictedBlocksOptions;
  readonly #workers = new Map<WorkerKey, WorkerState>();
  #evicted = 0;
  #confirmed = 0;
  #expired = 0;
  #withdrawn = 0;
  /** The last `record` call's stamp (0: none yet). */
  #stamp = 0;

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
   * Record that `worker` was sent a prompt with these keys at `nowMs`: every key from
   * `from` on counts as held until its TTL passes. `from` is how many leading keys the
   * worker's engine already reported (the index holds them; `matchBeyond` reads on from
   * there), so a long history the engine holds costs nothing to predict; a degraded
   * worker records the whole prompt (its approximate view must stand without the index).
   * A TTL of 0 on a healthy worker records nothing. Returns the record's stamp for
   * `withdraw` (0 when nothing was recorded).
   */
  record(worker: WorkerKey, keys: BlockKeySeq, nowMs: number, from = 0): number {
    const s = this.#state(worker);
    s.routed++;
    const ttl = s.degraded ? this.#o.degradedTtlMs : this.#o.ttlMs;
    const cap = s.degraded ? s.degradedCap : this.#o.maxBlocksPerWorker;
    if (ttl <= 0 || cap <= 0) return 0;
    const stamp = ++this.#stamp;
    const n = keys.length >>> 1;
    const first = s.degraded ? 0 : Math.max(0, Math.min(n, Math.floor(from)));
    const expiresAtMs = nowMs + ttl;
    const m = s.entries;
    // Compact when the queue is full, or when its dead and stale places outnumber the live
    // entries (a confirm-everything load leaves live near 0 while places pile up behind
    // one unconfirmed entry): the queue and the table stay within a constant factor of the
    // live entries (≤ the cap) plus one prompt, not of the records made within a TTL.
    if (s.tail + n - first > s.queue.length || s.tail - s.head > 4 * s.live + QUEUE_MIN) {
      this.#makeRoom(s, n - first);
    }
    const q = s.queue;
    for (let i = first; i < n; i++) {
      const hi = keys[2 * i]!;
      const lo = keys[2 * i + 1]!;
      const at = s.tail++;
      const e = m.get(hi, lo);
      if (e === undefined) {
        const added: Entry = { hi, lo, spilled: false, expiresAtMs, at, dead: false, stamp };
        m.add(added);
        q[at] = added;
        s.live++;
        continue;
      }
      q[at] = e;
      // Re-recorded: the youngest now.
      if (e.dead) s.live++;
      e.expiresAtMs = expiresAtMs;
      e.at = at;
      e.dead = false;
      e.stamp = stamp;
    }
    this.#sweep(s, nowMs);
    if (s.live > cap) {
      let over = s.live - cap;
      this.#evicted += over;
      while (over > 0) {
        const e = this.#pop(s);
        if (e !== null && !e.dead) over--;
      }
    }
    return stamp;
  }

  /**
   * The request `record` stamped `stamp` never reached `worker`'s engine (refused, or
   * answered 5xx/429 before its first byte): the keys that call was the last to record
   * count as absent again, so a false "this worker holds your prefix" does not draw the
   * requests after it. Keys recorded again since (by a later request) keep that record.
   */
  withdraw(worker: WorkerKey, keys: BlockKeySeq, stamp: number): void {
    const s = this.#workers.get(worker);
    if (s === undefined || s.live === 0 || stamp === 0) return;
    const n = keys.length >>> 1;
    for (let i = 0; i < n; i++) {
      const e = s.entries.get(keys[2 * i]!, keys[2 * i + 1]!);
      if (e !== undefined && !e.dead && e.stamp === stamp) {
        e.dead = true;
        s.live--;
        this.#withdrawn++;
      }
    }
  }

  /**
   * `worker`'s engine removed the block with key (`hi`, `lo`) (unsigned words) from its
   * GPU: a prediction of it counts as absent (until recorded again). Without this, a
   * prediction the engine stored and then evicted before any lookup met it while reported
   * would claim the evicted block for the rest of its TTL.
   */
  removed(worker: WorkerKey, hi: number, lo: number): void {
    const s = this.#workers.get(worker);
    if (s === undefined || s.live === 0) return;
    const e = s.entries.get(hi, lo);
    if (e === undefined || e.dead) return;
    e.dead = true;
    s.live--;
    this.#confirmed++;
  }

  /**
   * Leading keys of `keys` each worker holds as predicted and unexpired at `nowMs`
   * (workers with none are absent). Expired entries met here are dropped.
   */
  match(keys: BlockKeySeq, nowMs: number): Map<WorkerKey, number> {
    return this.matchBeyond(keys, nowMs, NO_DEPTH);
  }

  /**
   * A worker's overlap with the prediction counted on top of what its engine reported:
   * `depthOf(worker)` leading keys held per the index, then the predicted run that
   * continues them. Returns, for each worker whose run reaches past its reported depth,
   * that overlap (≥ 1 block more than reported). The run is read from key 0 as well, so a
   * prompt recorded in full still counts where the index holds less of it.
   *
   * Side effect: on a healthy worker, the predictions of reported keys met by the run from
   * key 0 or just below the reported depth are confirmed (the engine's report replaces
   * them), so after an eviction they cannot claim what the engine dropped. Reading on from
   * the reported depth is what keeps a longer prediction useful once its head is
   * confirmed: an agent's later step, sent back to the worker that holds its system
   * prompt, matches the context predicted there beyond that prompt (docs/prediction.md).
   * Expired entries met are dropped.
   */
  matchBeyond(
    keys: BlockKeySeq,
    nowMs: number,
    depthOf: (worker: WorkerKey) => number,
  ): Map<WorkerKey, number> {
    const out = new Map<WorkerKey, number>();
    const n = keys.length >>> 1;
    if (n === 0) return out;
    for (const [worker, s] of this.#workers) {
      if (s.live === 0) continue;
      const depth = Math.min(n, depthOf(worker));
      let i = this.#run(s, keys, 0, n, nowMs);
      if (depth > 0 && !s.degraded) {
        if (i > 0) this.#confirmLeading(s, keys, Math.min(i, depth));
        // And the predictions just below the reported depth (a prompt recorded past an
        // older, shorter report): walked down while live, so each is looked up once.
        if (i < depth) this.#confirmBelow(s, keys, depth, i);
      }
      if (i < depth && s.live > 0) i = this.#run(s, keys, depth, n, nowMs);
      if (i > depth) out.set(worker, i);
    }
    return out;
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
    clear(s);
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
    const s = this.#workers.get(worker);
    if (s !== undefined) clear(s);
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

  /**
   * Slots of `worker`'s recency queue and entries of its table, dead ones included: the
   * memory it holds (tests bound it by the cap).
   */
  footprint(worker: WorkerKey): { queue: number; entries: number } {
    const s = this.#workers.get(worker);
    return { queue: s?.queue.length ?? 0, entries: s?.entries.size ?? 0 };
  }

  /** Predicted blocks `worker` holds now (unswept expired ones included). */
  size(worker: WorkerKey): number {
    return this.#workers.get(worker)?.live ?? 0;
  }

  stats(): PredictedStats {
    let blocks = 0;
    let degradedWorkers = 0;
    for (const s of this.#workers.values()) {
      blocks += s.live;
      if (s.degraded) degradedWorkers++;
    }
    return {
      blocks,
      evicted: this.#evicted,
      confirmed: this.#confirmed,
      expired: this.#expired,
      withdrawn: this.#withdrawn,
      degradedWorkers,
    };
  }

  #state(worker: WorkerKey): WorkerState {
    let s = this.#workers.get(worker);
    if (s === undefined) {
      s = {
        entries: new BlockTable<Entry>(),
        queue: new Array<Entry | undefined>(QUEUE_MIN),
        head: 0,
        tail: 0,
        live: 0,
        degraded: false,
        degradedCap: 0,
        routed: 0,
      };
      this.#workers.set(worker, s);
    }
    return s;
  }

  /**
   * End of the run of live, unexpired keys from `from` (sweeps at an expired one). An entry
   * due to expire further from `nowMs` than any TTL this worker records with was recorded
   * at a later time than `nowMs`: the clock stepped back, and it does not count (else it
   * would for the TTL plus the step).
   */
  #run(s: WorkerState, keys: BlockKeySeq, from: number, n: number, nowMs: number): number {
    const m = s.entries;
    const o = this.#o;
    const latest = nowMs + (s.degraded ? Math.max(o.ttlMs, o.degradedTtlMs) : o.ttlMs);
    let i = from;
    for (; i < n; i++) {
      const e = m.get(keys[2 * i]!, keys[2 * i + 1]!);
      if (e === undefined || e.dead) break;
      if (e.expiresAtMs <= nowMs) {
        this.#sweep(s, nowMs);
        break;
      }
      if (e.expiresAtMs > latest) break;
    }
    return i;
  }

  /**
   * Mark live entries dead as confirmed, from key `depth − 1` down to key `stop`, ending at
   * the first key without one.
   */
  #confirmBelow(s: WorkerState, keys: BlockKeySeq, depth: number, stop: number): void {
    for (let i = depth - 1; i >= stop && s.live > 0; i--) {
      const e = s.entries.get(keys[2 * i]!, keys[2 * i + 1]!);
      if (e === undefined || e.dead) return;
      e.dead = true;
      s.live--;
      this.#confirmed++;
    }
  }

  /** Mark the first `n` keys' live entries dead, as confirmed by the engine (counted). */
  #confirmLeading(s: WorkerState, keys: BlockKeySeq, n: number): void {
    // Marked dead, not deleted: the next record of the prompt (often this same request's,
    // on this worker) revives the entry in place.
    for (let i = 0; i < n; i++) {
      const e = s.entries.get(keys[2 * i]!, keys[2 * i + 1]!);
      if (e !== undefined && !e.dead) {
        e.dead = true;
        s.live--;
        this.#confirmed++;
      }
    }
  }

  /**
   * Drop expired entries from the front. Recency order is expiry order while a worker's
   * TTL does not shrink (healthy → degraded only lengthens it; degraded → healthy clears),
   * so the walk stops at the first live entry.
   */
  #sweep(s: WorkerState, nowMs: number): void {
    const q = s.queue;
    while (s.head < s.tail) {
      const e = q[s.head]!;
      if (e.at === s.head && !e.dead && e.expiresAtMs > nowMs) break;
      if (this.#pop(s) === null) continue;
      if (!e.dead) this.#expired++;
    }
    // Empty: a queue grown under a burst goes back to its smallest size.
    if (s.head === s.tail && s.queue.length > QUEUE_MIN) {
      s.queue = new Array<Entry | undefined>(QUEUE_MIN);
      s.head = 0;
      s.tail = 0;
    }
  }

  /**
   * Take the front of the recency queue: a stale place is skipped (null); the entry of a
   * current one leaves the map (returned; the caller counts it).
   */
  #pop(s: WorkerState): Entry | null {
    const at = s.head++;
    const e = s.queue[at]!;
    s.queue[at] = undefined;
    if (e.at !== at) return null;
    s.entries.delete(e);
    if (!e.dead) s.live--;
    return e;
  }

  /**
   * Room for `n` more places: the current places move to the front (stale ones dropped,
   * dead entries with them). The size comes from what survives — the live entries, each
   * at exactly one current place — not from the queue before: the smallest power-of-two
   * multiple of `QUEUE_MIN` they fill at most a quarter of (a compaction then comes after
   * at least three times as many pushes as it moves). The queue is reused while that fits
   * and the survivors fill at least an eighth of it; past that it is made anew, smaller.
   */
  #makeRoom(s: WorkerState, n: number): void {
    const m = s.entries;
    const old = s.queue;
    const keep = s.live + n;
    let size = QUEUE_MIN;
    while (size < 4 * keep) size *= 2;
    const reuse = old.length >= size && (old.length === QUEUE_MIN || 8 * keep >= old.length);
    const q = reuse ? old : new Array<Entry | undefined>(size);
    let t = 0;
    for (let j = s.head; j < s.tail; j++) {
      const e = old[j]!;
      old[j] = undefined;
      if (e.at !== j) continue;
      if (e.dead) {
        m.delete(e);
        continue;
      }
      e.at = t;
      q[t++] = e;
    }
    s.queue = q;
    s.head = 0;
    s.tail = t;
  }
}

const QUEUE_MIN = 1024;

const NO_DEPTH = (): number => 0;

function clear(s: WorkerState): void {
  s.entries.clear();
  s.head = 0;
  s.tail = 0;
  s.live = 0;
  s.queue = new Array<Entry | undefined>(QUEUE_MIN);
}
