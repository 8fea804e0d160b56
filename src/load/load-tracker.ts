/**
 * Latest load snapshot per worker, from scrapes or pushes alike, with failure tracking
 * and staleness. A worker is stale once `staleAfterMs` passed since its last success; one
 * that never succeeded is stale from its first failure (a down worker must not look idle),
 * and otherwise `pending` until `staleAfterMs` after tracking began. A worker marked
 * unreachable (its event stream disconnected, a scrape could not connect, a caller's
 * connection was refused) is stale at once, until the next successful scrape or push, or
 * until the signal that marked it clears (rules: docs/load.md, "Liveness"). Pure state:
 * time is passed in.
 */

import type { WorkerKey } from "../protocol/worker.js";
import type { LoadSnapshot, LoadSource, LoadState, LoadView } from "./types.js";

export interface LoadTrackerConfig {
  /** Time without a successful scrape/push after which a worker is stale. */
  readonly staleAfterMs: number;
}

interface Entry {
  snapshot: LoadSnapshot | null;
  source: LoadSource | null;
  sinceMs: number;
  lastSuccessMs: number | null;
  lastFailureMs: number | null;
  lastError: string | null;
  consecutiveFailures: number;
  totalFailures: number;
  totalSuccesses: number;
  /** Why the worker is unreachable (source → reason, when); empty = reachable. */
  readonly unreachable: Map<UnreachableSource, { reason: string; atMs: number }>;
  unreachableSinceMs: number | null;
  timesUnreachable: number;
}

/**
 * What took a worker out: its KV event stream disconnected (`events`), a scrape could not
 * connect or timed out (`scrape`), a caller's connection to it failed (`caller`, e.g. the
 * gateway). Each source is cleared by its own recovery; any successful scrape or push
 * clears them all.
 */
export type UnreachableSource = "events" | "scrape" | "caller";

/** Checks a snapshot's numbers; returns a message naming the bad field, or null. */
export function validateSnapshot(s: LoadSnapshot): string | null {
  const nonNeg = (name: string, v: number | undefined) =>
    v !== undefined && !(Number.isFinite(v) && v >= 0)
      ? `${name} must be a finite number ≥ 0`
      : null;
  if (!(Number.isFinite(s.kvUsage) && s.kvUsage >= 0 && s.kvUsage <= 1)) {
    return "kvUsage must be a number in 0..1";
  }
  return (
    nonNeg("running", s.running) ??
    nonNeg("waiting", s.waiting) ??
    nonNeg("prefixCacheQueries", s.prefixCacheQueries) ??
    nonNeg("prefixCacheHits", s.prefixCacheHits) ??
    nonNeg("numGpuBlocks", s.numGpuBlocks) ??
    nonNeg("blockSize", s.blockSize) ??
    (s.prefixCacheHitRate !== undefined &&
    !(
      Number.isFinite(s.prefixCacheHitRate) &&
      s.prefixCacheHitRate >= 0 &&
      s.prefixCacheHitRate <= 1
    )
      ? "prefixCacheHitRate must be a number in 0..1"
      : null) ??
    (Number.isFinite(s.atMs) ? null : "atMs must be finite")
  );
}

/** What `LoadTracker.handle` gives out: one worker's entry, read only. */
export interface LoadHandle {
  readonly snapshot: LoadSnapshot | null;
}

export class LoadTracker {
  readonly #entries = new Map<WorkerKey, Entry>();
  readonly staleAfterMs: number;
  /** Bumped whenever an entry is created or forgotten: handles and their absence go stale. */
  #entriesVersion = 0;
  /** Sets that collect the keys of workers whose entry changed (`watch`). */
  readonly #watchers: Set<WorkerKey>[] = [];

  constructor(config: LoadTrackerConfig) {
    if (!(config.staleAfterMs > 0)) throw new RangeError("staleAfterMs must be > 0");
    this.staleAfterMs = config.staleAfterMs;
  }

  /** Start the staleness clock for a worker (no-op if already tracked). */
  track(worker: WorkerKey, nowMs: number): void {
    this.#entry(worker, nowMs);
  }

  /** Forget a worker entirely (it was removed from the fleet). */
  forget(worker: WorkerKey): void {
    if (this.#entries.delete(worker)) this.#entriesVersion++;
    this.#changed(worker);
  }

  /**
   * Changes whenever a worker starts or stops being tracked: a `handle` (or its absence)
   * read before a change may be out of date, one read since is live. Lets a decision over
   * thousands of workers read each one without a lookup by key (`router-columns.ts`).
   */
  get entriesVersion(): number {
    return this.#entriesVersion;
  }

  /**
   * From now on, add to `into` the key of every worker whose entry changes (snapshot,
   * failures, reachability, tracking; the owner empties it as it reads). Staleness by
   * time alone changes nothing here: `staleSince` says when it comes.
   */
  watch(into: Set<WorkerKey>): void {
    this.#watchers.push(into);
  }

  #changed(worker: WorkerKey): void {
    for (const w of this.#watchers) w.add(worker);
  }

  /**
   * For a handle's worker: whether it is stale whatever the time (unreachable, or failed
   * before any success), and otherwise the time its staleness counts from (stale once
   * `nowMs - since >= staleAfterMs`, the test `isStale` makes). Untracked: never stale.
   */
  staleRule(h: LoadHandle | undefined): { readonly always: boolean; readonly since: number } {
    if (h === undefined) return { always: false, since: Number.POSITIVE_INFINITY };
    const e = h as Entry;
    if (e.unreachable.size > 0) return { always: true, since: 0 };
    if (e.lastSuccessMs === null && e.totalFailures > 0) return { always: true, since: 0 };
    return { always: false, since: e.lastSuccessMs ?? e.sinceMs };
  }

  /** The worker's live entry (undefined = not tracked), for `isStaleHandle`/`snapshot`. */
  handle(worker: WorkerKey): LoadHandle | undefined {
    return this.#entries.get(worker);
  }

  /** `isStale` of a handle's worker (undefined = not tracked: never stale). */
  isStaleHandle(h: LoadHandle | undefined, nowMs: number): boolean {
    return h === undefined ? false : this.#staleEntry(h as Entry, nowMs);
  }

  /**
   * Record a successful observation. Throws `RangeError` on invalid numbers (callers that
   * take input from outside validate first with `validateSnapshot`).
   */
  update(
    worker: WorkerKey,
    snapshot: LoadSnapshot,
    nowMs: number,
    source: LoadSource = "scrape",
  ): void {
    const problem = validateSnapshot(snapshot);
    if (problem !== null) throw new RangeError(`load snapshot for ${worker}: ${problem}`);
    const e = this.#entry(worker, nowMs);
    e.snapshot = snapshot;
    e.source = source;
    e.lastSuccessMs = nowMs;
    e.consecutiveFailures = 0;
    e.totalSuccesses++;
    // The engine answered: whatever said it was gone before the observation (the
    // scrape's start) is out of date. A signal newer than that (a scrape that began
    // before a kill and answered after it) still stands.
    for (const [source, u] of e.unreachable)
      if (u.atMs <= snapshot.atMs) e.unreachable.delete(source);
    if (e.unreachable.size === 0) e.unreachableSinceMs = null;
    this.#changed(worker);
  }

  /**
   * Take a worker out of the candidates now: stale until a success or `markReachable`
   * with the same source. Returns true when it was reachable before (a transition).
   */
  markUnreachable(
    worker: WorkerKey,
    source: UnreachableSource,
    reason: string,
    nowMs: number,
  ): boolean {
    const e = this.#entries.get(worker);
    if (e === undefined) return false;
    const was = e.unreachable.size > 0;
    e.unreachable.set(source, { reason, atMs: nowMs });
    this.#changed(worker);
    if (!was) {
      e.unreachableSinceMs = nowMs;
      e.timesUnreachable++;
    }
    return !was;
  }

  /** The signal `source` recovered (e.g. the event stream reconnected). */
  markReachable(worker: WorkerKey, source: UnreachableSource): void {
    const e = this.#entries.get(worker);
    if (e === undefined) return;
    e.unreachable.delete(source);
    if (e.unreachable.size === 0) e.unreachableSinceMs = null;
    this.#changed(worker);
  }

  /**
   * When the latest signal still holding the worker out was given (null: reachable): only
   * an observation that began at or after it clears every signal (`update`).
   */
  latestUnreachableMs(worker: WorkerKey): number | null {
    const e = this.#entries.get(worker);
    if (e === undefined || e.unreachable.size === 0) return null;
    let latest = Number.NEGATIVE_INFINITY;
    for (const u of e.unreachable.values()) if (u.atMs > latest) latest = u.atMs;
    return latest;
  }

  /** Why the worker is out ("events: disconnected; scrape: ECONNREFUSED"), or null. */
  unreachableReason(worker: WorkerKey): string | null {
    const e = this.#entries.get(worker);
    if (e === undefined || e.unreachable.size === 0) return null;
    return [...e.unreachable].map(([k, v]) => `${k}: ${v.reason}`).join("; ");
  }

  /** Record a failed scrape (or a push that could not be used). */
  recordFailure(worker: WorkerKey, error: string, nowMs: number): void {
    const e = this.#entry(worker, nowMs);
    e.lastFailureMs = nowMs;
    e.lastError = error;
    e.consecutiveFailures++;
    e.totalFailures++;
    this.#changed(worker);
  }

  /**
   * Whether the worker is tracked and is unreachable, or has had no success for
   * `staleAfterMs`, or has never succeeded and at least one attempt failed.
   */
  isStale(worker: WorkerKey, nowMs: number): boolean {
    const e = this.#entries.get(worker);
    return e === undefined ? false : this.#staleEntry(e, nowMs);
  }

  #staleEntry(e: Entry, nowMs: number): boolean {
    if (e.unreachable.size > 0) return true;
    if (e.lastSuccessMs === null && e.totalFailures > 0) return true;
    return nowMs - (e.lastSuccessMs ?? e.sinceMs) >= this.staleAfterMs;
  }

  /** Latest snapshot, or null (fast path for the router; ignores staleness). */
  snapshot(worker: WorkerKey): LoadSnapshot | null {
    return this.#entries.get(worker)?.snapshot ?? null;
  }

  state(worker: WorkerKey, nowMs: number): LoadState {
    const e = this.#entries.get(worker);
    if (e === undefined) return "unknown";
    if (this.isStale(worker, nowMs)) return "stale";
    return e.lastSuccessMs === null ? "pending" : "fresh";
  }

  /** Everything known about a worker at `nowMs`. */
  view(worker: WorkerKey, nowMs: number): LoadView {
    const e = this.#entries.get(worker);
    const state = this.state(worker, nowMs);
    return {
      worker,
      state,
      stale: state === "stale",
      snapshot: e?.snapshot ?? null,
      source: e?.source ?? null,
      lastSuccessMs: e?.lastSuccessMs ?? null,
      lastFailureMs: e?.lastFailureMs ?? null,
      lastError: e?.lastError ?? null,
      consecutiveFailures: e?.consecutiveFailures ?? 0,
      totalFailures: e?.totalFailures ?? 0,
      totalSuccesses: e?.totalSuccesses ?? 0,
      unreachable: this.unreachableReason(worker),
      unreachableSinceMs: e?.unreachableSinceMs ?? null,
      timesUnreachable: e?.timesUnreachable ?? 0,
    };
  }

  /** Tracked workers. */
  workers(): WorkerKey[] {
    return [...this.#entries.keys()];
  }

  #entry(worker: WorkerKey, nowMs: number): Entry {
    let e = this.#entries.get(worker);
    if (e === undefined) {
      e = {
        snapshot: null,
        source: null,
        sinceMs: nowMs,
        lastSuccessMs: null,
        lastFailureMs: null,
        lastError: null,
        consecutiveFailures: 0,
        totalFailures: 0,
        totalSuccesses: 0,
        unreachable: new Map(),
        unreachableSinceMs: null,
        timesUnreachable: 0,
      };
      this.#entries.set(worker, e);
      this.#entriesVersion++;
      this.#changed(worker);
    }
    return e;
  }
}
