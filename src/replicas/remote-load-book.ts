/**
 * The other replicas' in-flight requests, as this replica last heard of them: per
 * replica (so one that stops speaking is forgotten as a whole), and per worker totals
 * kept incrementally so the router reads them in O(1) per candidate. No I/O: the Redis
 * side (`redis-load-sync.ts`) feeds it; time is passed in.
 *
 * Staleness is bounded twice: a replica not heard from (message or heartbeat) within
 * `staleAfterMs` is dropped with all its requests, and every entry carries the sender's
 * own prefill and request deadlines, applied by `sweep`.
 */

import { RunningTotals, ZERO_TOTALS } from "../load/in-flight-totals.js";
import type { PredictedLoadSource } from "../load/predicted-load-source.js";
import type { InFlightTotals } from "../load/types.js";
import type { WorkerKey } from "../protocol/worker.js";
import type { SharedEntry } from "./wire.js";

interface Entry {
  readonly e: SharedEntry;
  readonly replica: string;
  pending: boolean;
}

interface WorkerState {
  readonly entries: Set<Entry>;
  readonly all: RunningTotals;
  since: RunningTotals;
  sinceMs: number;
}

interface ReplicaState {
  lastSeenMs: number;
  lastSeq: number;
  readonly entries: Map<string, Entry>;
  /** Ids reported done recently: a hash read racing the `done` must not revive them. */
  readonly doneAt: Map<string, number>;
}

/** How a message's sequence number relates to the last one heard from its replica. */
export type SeqCheck = "next" | "gap" | "new";

export class RemoteLoadBook implements PredictedLoadSource {
  readonly #replicas = new Map<string, ReplicaState>();
  readonly #workers = new Map<WorkerKey, WorkerState>();
  readonly staleAfterMs: number;
  #droppedReplicas = 0;
  #expiredEntries = 0;

  constructor(config: { readonly staleAfterMs: number }) {
    if (!(config.staleAfterMs > 0)) throw new RangeError("staleAfterMs must be > 0");
    this.staleAfterMs = config.staleAfterMs;
  }

  /** Note a message (or heartbeat) from `replica`; says whether messages were missed. */
  heard(replica: string, seq: number, nowMs: number): SeqCheck {
    const r = this.#replicas.get(replica);
    if (r === undefined) {
      this.#replica(replica, nowMs).lastSeq = seq;
      return "new";
    }
    r.lastSeenMs = Math.max(r.lastSeenMs, nowMs);
    const check: SeqCheck = seq === r.lastSeq + 1 ? "next" : "gap";
    r.lastSeq = seq;
    return check;
  }

  add(replica: string, e: SharedEntry, nowMs: number): void {
    const r = this.#replica(replica, nowMs);
    const old = r.entries.get(e.id);
    if (old !== undefined) this.#remove(r, old);
    if (e.expiresMs <= nowMs) return;
    const x: Entry = { e, replica, pending: e.pending && e.prefillEndMs > nowMs };
    r.entries.set(e.id, x);
    const w = this.#worker(e.worker);
    w.entries.add(x);
    w.all.add(x.pending, x.e.prefillTokens, x.e.blocks, 1);
    if (e.addedMs >= w.sinceMs) w.since.add(x.pending, x.e.prefillTokens, x.e.blocks, 1);
  }

  firstToken(replica: string, id: string): void {
    const x = this.#replicas.get(replica)?.entries.get(id);
    if (x !== undefined) this.#endPrefill(x);
  }

  done(replica: string, id: string, nowMs: number): void {
    const r = this.#replicas.get(replica);
    if (r === undefined) return;
    r.doneAt.set(id, nowMs);
    const x = r.entries.get(id);
    if (x !== undefined) this.#remove(r, x);
  }

  /** Replace everything known of `replica` by a full read of its hash. */
  replace(replica: string, entries: Iterable<SharedEntry>, nowMs: number): void {
    const r = this.#replica(replica, nowMs);
    for (const x of [...r.entries.values()]) this.#remove(r, x);
    for (const e of entries) if (!r.doneAt.has(e.id)) this.add(replica, e, nowMs);
  }

  /** Forget a replica and all its requests (it left, or went silent). */
  drop(replica: string): void {
    const r = this.#replicas.get(replica);
    if (r === undefined) return;
    for (const x of [...r.entries.values()]) this.#remove(r, x);
    this.#replicas.delete(replica);
  }

  /** Apply deadlines and the silence bound at `nowMs`. */
  sweep(nowMs: number): void {
    for (const [id, r] of this.#replicas) {
      if (r.lastSeenMs + this.staleAfterMs <= nowMs) {
        this.drop(id);
        this.#droppedReplicas++;
        continue;
      }
      for (const x of [...r.entries.values()]) {
        if (x.e.expiresMs <= nowMs) {
          this.#remove(r, x);
          this.#expiredEntries++;
        } else if (x.pending && x.e.prefillEndMs <= nowMs) this.#endPrefill(x);
      }
      for (const [id2, at] of r.doneAt) if (at + this.staleAfterMs <= nowMs) r.doneAt.delete(id2);
    }
  }

  totals(worker: WorkerKey): InFlightTotals {
    return this.#workers.get(worker)?.all ?? ZERO_TOTALS;
  }

  totalsSince(worker: WorkerKey, sinceMs: number): InFlightTotals {
    const w = this.#workers.get(worker);
    if (w === undefined) return ZERO_TOTALS;
    if (w.sinceMs !== sinceMs) {
      const t = new RunningTotals();
      for (const x of w.entries)
        if (x.e.addedMs >= sinceMs) t.add(x.pending, x.e.prefillTokens, x.e.blocks, 1);
      w.since = t;
      w.sinceMs = sinceMs;
    }
    return w.since;
  }

  /** Replicas heard from, in-flight requests per replica, and what the bounds removed. */
  stats(): {
    readonly replicas: Readonly<Record<string, number>>;
    readonly entries: number;
    readonly droppedReplicas: number;
    readonly expiredEntries: number;
  } {
    const replicas: Record<string, number> = {};
    let entries = 0;
    for (const [id, r] of this.#replicas) {
      replicas[id] = r.entries.size;
      entries += r.entries.size;
    }
    return {
      replicas,
      entries,
      droppedReplicas: this.#droppedReplicas,
      expiredEntries: this.#expiredEntries,
    };
  }

  has(replica: string): boolean {
    return this.#replicas.has(replica);
  }

  #replica(id: string, nowMs: number): ReplicaState {
    let r = this.#replicas.get(id);
    if (r === undefined) {
      r = { lastSeenMs: nowMs, lastSeq: -1, entries: new Map(), doneAt: new Map() };
      this.#replicas.set(id, r);
    } else r.lastSeenMs = Math.max(r.lastSeenMs, nowMs);
    return r;
  }

  #worker(worker: WorkerKey): WorkerState {
    let w = this.#workers.get(worker);
    if (w === undefined) {
      w = {
        entries: new Set(),
        all: new RunningTotals(),
        since: new RunningTotals(),
        sinceMs: -Infinity,
      };
      this.#workers.set(worker, w);
    }
    return w;
  }

  #endPrefill(x: Entry): void {
    if (!x.pending) return;
    const w = this.#workers.get(x.e.worker)!;
    w.all.endPrefill(x.e.prefillTokens);
    if (x.e.addedMs > w.sinceMs) w.since.endPrefill(x.e.prefillTokens);
    x.pending = false;
  }

  #remove(r: ReplicaState, x: Entry): void {
    r.entries.delete(x.e.id);
    const w = this.#workers.get(x.e.worker)!;
    w.all.add(x.pending, x.e.prefillTokens, x.e.blocks, -1);
    if (x.e.addedMs > w.sinceMs) w.since.add(x.pending, x.e.prefillTokens, x.e.blocks, -1);
    w.entries.delete(x);
    if (w.entries.size === 0) this.#workers.delete(x.e.worker);
  }
}
