/**
 * The other replicas' in-flight requests, as this replica last heard of them: per
 * replica (so one that stops speaking is forgotten as a whole), and per worker totals
 * kept incrementally so the router reads them in O(1) per candidate: "routed at or after
 * t" totals move a time-ordered cursor (`load/since-cursor.ts`) instead of rescanning.
 * No I/O: the Redis side (`redis-load-sync.ts`) feeds it; time is passed in.
 *
 * Staleness is bounded twice: a replica not heard from (message or heartbeat) within
 * `staleAfterMs` is dropped with all its requests, and every entry carries the sender's
 * own prefill and request deadlines, applied by `sweep`.
 */

import { ZERO_TOTALS } from "../load/in-flight-totals.js";
import type { PredictedLoadSource } from "../load/predicted-load-source.js";
import { pendingSharingIn, type TimedEntry, TimedTotals } from "../load/since-cursor.js";
import type { InFlightTotals } from "../load/types.js";
import type { WorkerKey } from "../protocol/worker.js";
import { type SharedEntry, withoutKeys } from "./wire.js";

interface Entry extends TimedEntry {
  readonly e: SharedEntry;
  readonly replica: string;
  /** The prompt's block keys while its prefill is pending (then dropped). */
  keys: Uint32Array | undefined;
}

const entryKeys = (x: Entry): Uint32Array | undefined => x.keys;

/** A worker's peer entries in time order and their totals. */
type WorkerState = TimedTotals<Entry>;

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
  /** Sets told of every worker whose figures change (`watch`). */
  readonly #watchers: Set<WorkerKey>[] = [];
  /** During `replace`: workers whose queue was appended to unsorted. */
  #bulk: Set<WorkerState> | null = null;

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
    // Routed again after its done (a retry under the same id): alive again, and a hash
    // read must not skip it.
    r.doneAt.delete(e.id);
    this.#add(r, replica, e, nowMs);
  }

  #add(r: ReplicaState, replica: string, e: SharedEntry, nowMs: number): void {
    const old = r.entries.get(e.id);
    if (old !== undefined) this.#remove(r, old);
    if (e.expiresMs <= nowMs) return;
    // The keys are held apart from the entry, so they go when the prefill ends.
    const pending = e.pending && e.prefillEndMs > nowMs;
    const x: Entry = {
      e: withoutKeys(e),
      replica,
      addedMs: e.addedMs,
      prefillTokens: e.prefillTokens,
      blocks: e.blocks,
      pending,
      live: true,
      before: false,
      keys: pending ? e.prefixKeys : undefined,
    };
    r.entries.set(e.id, x);
    this.#touch(e.worker);
    const w = this.#worker(e.worker);
    if (this.#bulk === null) w.add(x);
    else {
      w.append(x);
      this.#bulk.add(w);
    }
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

  /**
   * Replace everything known of `replica` by a full read of its hash. `writtenMs`: when
   * the replica last wrote it, on this replica's clock (default `nowMs`). A read is no
   * sign of life: a replica that crashed leaves its hash until it expires, so the read
   * makes it as alive as that write, never more (it is dropped `staleAfterMs` after it).
   */
  replace(
    replica: string,
    entries: Iterable<SharedEntry>,
    nowMs: number,
    writtenMs: number = nowMs,
  ): void {
    const r = this.#replica(replica, Math.min(writtenMs, nowMs));
    for (const x of [...r.entries.values()]) this.#remove(r, x);
    // A full read re-adds a replica's older entries behind newer ones: append them all,
    // then sort each touched worker once instead of inserting one by one.
    const touched = new Set<WorkerState>();
    this.#bulk = touched;
    try {
      for (const e of entries) if (!r.doneAt.has(e.id)) this.#add(r, replica, e, nowMs);
    } finally {
      this.#bulk = null;
    }
    for (const w of touched) w.resort();
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
    return w === undefined ? ZERO_TOTALS : w.since(sinceMs);
  }

  watch(changed: Set<WorkerKey>): void {
    this.#watchers.push(changed);
  }

  #touch(worker: WorkerKey): void {
    for (const s of this.#watchers) s.add(worker);
  }

  pendingSharing(worker: WorkerKey, keys: Uint32Array, blocks: number): number {
    const w = this.#workers.get(worker);
    return w === undefined ? 0 : pendingSharingIn(w, keys, blocks, entryKeys);
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
      w = new TimedTotals<Entry>();
      this.#workers.set(worker, w);
    }
    return w;
  }

  #endPrefill(x: Entry): void {
    this.#workers.get(x.e.worker)!.endPrefill(x);
    x.keys = undefined;
    this.#touch(x.e.worker);
  }

  #remove(r: ReplicaState, x: Entry): void {
    r.entries.delete(x.e.id);
    x.keys = undefined; // dead entries wait in the worker's queue until it is compacted
    this.#touch(x.e.worker);
    const w = this.#workers.get(x.e.worker)!;
    w.remove(x);
    if (w.count === 0) this.#workers.delete(x.e.worker);
  }
}
