/**
 * "Routed at or after time t" totals without rescanning (a request routed in the
 * snapshot's own millisecond counts as newer: see `in-flight.ts`): a worker's entries kept in time
 * order with a cursor at t, so moving t visits only the entries it crosses. Shared by
 * this router's own bookkeeping (`in-flight.ts`) and the other replicas' requests
 * (`replicas/remote-load-book.ts`); each keeps `all` itself and reads
 * `since = all − before`.
 */

import type { RunningTotals } from "./in-flight-totals.js";

/** One in-flight request as the cursor sees it. */
export interface TimedEntry {
  readonly addedMs: number;
  readonly prefillTokens: number;
  readonly blocks: number;
  pending: boolean;
  live: boolean;
  /** Counted in `before` (added before the cursor's time). */
  before: boolean;
}

/** A worker's entries in time order and the cursor over them. */
export interface SinceQueue<E extends TimedEntry> {
  queue: E[];
  /** `queue[0, cursor)` were added before `sinceMs`. */
  cursor: number;
  sinceMs: number;
  /** Totals of live entries added before `sinceMs`. */
  readonly before: RunningTotals;
}

/** Counts into `before` the queued entries added before `sinceMs` not yet counted. */
export function advance<E extends TimedEntry>(w: SinceQueue<E>): void {
  const q = w.queue;
  while (w.cursor < q.length && q[w.cursor]!.addedMs < w.sinceMs) {
    const e = q[w.cursor++]!;
    if (!e.live) continue;
    e.before = true;
    w.before.add(e.pending, e.prefillTokens, e.blocks, 1);
  }
}

/** `sinceMs` moved back (rare): entries at or after the new time leave `before`. */
export function retreat<E extends TimedEntry>(w: SinceQueue<E>, sinceMs: number): void {
  const q = w.queue;
  while (w.cursor > 0 && q[w.cursor - 1]!.addedMs >= sinceMs) {
    const e = q[--w.cursor]!;
    if (!e.live || !e.before) continue;
    e.before = false;
    w.before.add(e.pending, e.prefillTokens, e.blocks, -1);
  }
}

/** Moves the cursor to `sinceMs`, visiting only the entries between the old and new time. */
export function moveTo<E extends TimedEntry>(w: SinceQueue<E>, sinceMs: number): void {
  if (w.sinceMs === sinceMs) return;
  if (sinceMs < w.sinceMs) retreat(w, sinceMs);
  w.sinceMs = sinceMs;
  advance(w);
}

/** Drops dead entries from the queue, keeping the cursor on the same live entries. */
export function compactQueue<E extends TimedEntry>(w: SinceQueue<E>): void {
  let cursor = 0;
  const live: E[] = [];
  for (const [i, e] of w.queue.entries()) {
    if (!e.live) continue;
    if (i < w.cursor) cursor++;
    live.push(e);
  }
  w.queue = live;
  w.cursor = cursor;
}
