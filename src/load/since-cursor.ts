/**
 * One worker's in-flight requests with running totals, and "routed at or after time t"
 * totals without rescanning: the entries are kept in time order with a cursor at t, so
 * moving t visits only the entries it crosses. A request routed in the snapshot's own
 * millisecond counts as newer (see `in-flight.ts`). Shared by this router's own
 * bookkeeping (`in-flight.ts`, times non-decreasing) and the other replicas' requests
 * (`replicas/remote-load-book.ts`, nearly in order).
 */

import { RunningTotals, ZERO_TOTALS } from "./in-flight-totals.js";
import type { InFlightTotals } from "./types.js";

/** One in-flight request as the totals see it. */
export interface TimedEntry {
  readonly addedMs: number;
  readonly prefillTokens: number;
  readonly blocks: number;
  pending: boolean;
  live: boolean;
  /** Counted in `before` (added before the cursor's time). */
  before: boolean;
}

export class TimedTotals<E extends TimedEntry> {
  /** Live entries. */
  count = 0;
  /** Totals of every live entry. The object is live: read, don't keep. */
  readonly all = new RunningTotals();
  /** Totals of live entries added before `#sinceMs`. */
  readonly #before = new RunningTotals();
  /** `all − before`, handed out by `since`. */
  readonly #since = new RunningTotals();
  #sinceMs = Number.NEGATIVE_INFINITY;
  /** Entries in time order (dead ones until compacted). */
  #queue: E[] = [];
  /** `#queue[0, cursor)` were added before `#sinceMs`. */
  #cursor = 0;
  /** `#queue[0, oldest)` are dead: where `oldestLive` resumes its search. */
  #oldest = 0;

  /**
   * Counts a live entry, in time order (after entries of the same time). Entries that
   * arrive in order are pushed; a late one is placed by binary search. An entry before
   * the cursor's time is counted in `before` at once.
   */
  add(e: E): void {
    this.#count(e);
    if (this.#queue.length > 2 * this.count + 64) this.#compact();
    const q = this.#queue;
    let p = q.length;
    if (p > 0 && q[p - 1]!.addedMs > e.addedMs) {
      let lo = 0;
      while (lo < p) {
        const mid = (lo + p) >>> 1;
        if (q[mid]!.addedMs > e.addedMs) p = mid;
        else lo = mid + 1;
      }
    }
    if (p === q.length) q.push(e);
    else q.splice(p, 0, e);
    if (e.addedMs < this.#sinceMs) {
      // Every entry from the cursor on is at or after sinceMs, so p ≤ cursor here.
      this.#cursor++;
      this.#countBefore(e);
    }
  }

  /** Counts a live entry without ordering it; `resort` must follow before any read. */
  append(e: E): void {
    this.#count(e);
    this.#queue.push(e);
  }

  /** Sorts the live entries by time and recounts `before` from scratch (after `append`). */
  resort(): void {
    const q = this.#queue.filter((e) => e.live).sort((a, b) => a.addedMs - b.addedMs);
    this.#before.difference(ZERO_TOTALS, ZERO_TOTALS);
    for (const e of q) e.before = false;
    this.#queue = q;
    this.#cursor = 0;
    this.#oldest = 0;
    this.#advance();
  }

  /** A counted entry produced its first token: its prefill no longer loads the worker. */
  endPrefill(e: E): void {
    if (!e.pending) return;
    this.all.endPrefill(e.prefillTokens);
    if (e.before) this.#before.endPrefill(e.prefillTokens);
    e.pending = false;
  }

  /** Uncounts a live entry (it stays in the queue, dead, until compacted). */
  remove(e: E): void {
    this.all.add(e.pending, e.prefillTokens, e.blocks, -1);
    if (e.before) this.#before.add(e.pending, e.prefillTokens, e.blocks, -1);
    e.live = false;
    this.count--;
  }

  /**
   * Totals of the entries added at or after `sinceMs`. Cheap when `sinceMs` is the same
   * as last time (the usual case: one snapshot, many routes). The object is live.
   */
  since(sinceMs: number): InFlightTotals {
    if (this.#sinceMs !== sinceMs) {
      if (sinceMs < this.#sinceMs) this.#retreat(sinceMs);
      this.#sinceMs = sinceMs;
      this.#advance();
    }
    return this.#since.difference(this.all, this.#before);
  }

  /**
   * The oldest live entry. Resumes after the dead prefix already walked: repeated calls
   * that each remove the answer stay O(1) amortised.
   */
  oldestLive(): E | undefined {
    const q = this.#queue;
    while (this.#oldest < q.length && !q[this.#oldest]!.live) this.#oldest++;
    return q[this.#oldest];
  }

  /**
   * The oldest live entry whose prefill is pending (under FIFO prefill, the one in
   * progress). A walk over the live entries older than it (those in decode).
   */
  oldestPending(): E | undefined {
    const q = this.#queue;
    for (let i = this.#oldest; i < q.length; i++) {
      const e = q[i]!;
      if (e.live && e.pending) return e;
    }
    return undefined;
  }

  /** Sum of `f` over the live entries, oldest first. */
  sumLive(f: (e: E) => number): number {
    const q = this.#queue;
    let sum = 0;
    for (let i = this.#oldest; i < q.length; i++) {
      const e = q[i]!;
      if (e.live) sum += f(e);
    }
    return sum;
  }

  /**
   * With no live entry left: back to the state of a new instance (totals zero, no
   * cursor, no dead entries kept), so an emptied worker kept for its handle is exactly
   * a fresh one. No-op while any entry is live.
   */
  resetIfEmpty(): void {
    if (this.count !== 0) return;
    this.all.difference(ZERO_TOTALS, ZERO_TOTALS);
    this.#before.difference(ZERO_TOTALS, ZERO_TOTALS);
    this.#sinceMs = Number.NEGATIVE_INFINITY;
    this.#queue = [];
    this.#cursor = 0;
    this.#oldest = 0;
  }

  /** Every live entry, oldest first. */
  live(): E[] {
    return this.#queue.filter((e) => e.live);
  }

  #count(e: E): void {
    this.count++;
    this.all.add(e.pending, e.prefillTokens, e.blocks, 1);
  }

  #countBefore(e: E): void {
    e.before = true;
    this.#before.add(e.pending, e.prefillTokens, e.blocks, 1);
  }

  /** Counts into `before` the queued entries added before `#sinceMs` not yet counted. */
  #advance(): void {
    const q = this.#queue;
    while (this.#cursor < q.length && q[this.#cursor]!.addedMs < this.#sinceMs) {
      const e = q[this.#cursor++]!;
      if (e.live) this.#countBefore(e);
    }
  }

  /** `sinceMs` moved back (rare): entries at or after the new time leave `before`. */
  #retreat(sinceMs: number): void {
    const q = this.#queue;
    while (this.#cursor > 0 && q[this.#cursor - 1]!.addedMs >= sinceMs) {
      const e = q[--this.#cursor]!;
      if (!e.live || !e.before) continue;
      e.before = false;
      this.#before.add(e.pending, e.prefillTokens, e.blocks, -1);
    }
  }

  /** Drops dead entries, keeping the cursor on the same live entries. */
  #compact(): void {
    let cursor = 0;
    const live: E[] = [];
    for (const [i, e] of this.#queue.entries()) {
      if (!e.live) continue;
      if (i < this.#cursor) cursor++;
      live.push(e);
    }
    this.#queue = live;
    this.#cursor = cursor;
    this.#oldest = 0;
  }
}

/**
 * Pending prefill tokens of `w`'s live entries whose prompt shares the first `blocks`
 * blocks of `keys` (chained block keys, two words per block: two prompts share their
 * first n blocks exactly when their keys at block n − 1 are equal). `keysOf` gives an
 * entry's keys, or null when it has none (it then shares only the empty prefix):
 * `blocks` ≤ 0 counts every pending token. One pass over the live entries.
 */
export function pendingSharingIn<E extends TimedEntry>(
  w: TimedTotals<E>,
  keys: Uint32Array,
  blocks: number,
  keysOf: (e: E) => Uint32Array | null | undefined,
): number {
  if (blocks <= 0) return w.all.pendingPrefillTokens;
  const at = 2 * (blocks - 1);
  if (at + 1 >= keys.length) return 0;
  const hi = keys[at]!;
  const lo = keys[at + 1]!;
  return w.sumLive((e) => {
    if (!e.pending) return 0;
    const k = keysOf(e);
    if (k === null || k === undefined || k.length <= at + 1) return 0;
    return k[at] === hi && k[at + 1] === lo ? e.prefillTokens : 0;
  });
}
