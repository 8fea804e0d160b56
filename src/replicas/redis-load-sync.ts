/**
 * Sharing predicted load between router replicas through Redis (or Valkey).
 *
 * Each replica keeps, in Redis, one hash of its own in-flight requests
 * (`<prefix>:replica:<id>`, field = request id, value = `wire.ts` entry) whose key TTL is
 * `staleAfterMs` and is refreshed by every flush, plus its id in a sorted set of live
 * replicas (`<prefix>:replicas`, score = last write). Changes are also published on one
 * channel (`<prefix>:load`), batched per event-loop turn, so peers apply them within a
 * round trip; a heartbeat every `heartbeatMs` keeps the peers' view of us alive. A
 * crashed replica stops heartbeating: its peers drop its requests after `staleAfterMs`
 * and its hash expires on its own.
 *
 * Never on the routing path: the tracker's listener calls only queue. While Redis is
 * behind (`maxPendingFlushes` writes outstanding) changes wait and go out as one batch.
 * When Redis is down or slow (not ready, a write failed or timed out, over 100,000
 * changes waiting), changes are dropped and counted, the replica routes on its own state plus what it
 * still knows of peers (which ages out), and once Redis answers again it rewrites its
 * whole hash atomically, tells peers to re-read it and re-reads theirs.
 * Long file: one connection lifecycle (publish, receive, resync, status) in one place.
 */

import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import type { WorkerKey } from "../protocol/worker.js";
import type { LogSink } from "../util/log-sink.js";
import type { RemoteLoadBook } from "./remote-load-book.js";
import type { InFlightListener } from "./shared-in-flight.js";
import {
  decodeEntry,
  decodeMessage,
  encodeEntry,
  encodeMessage,
  type SharedEntry,
  type SyncOp,
  withoutKeys,
} from "./wire.js";

/** Changes held while Redis is behind; beyond this they are dropped and resynced later. */
const MAX_QUEUED_OPS = 100_000;

export interface RedisLoadSyncOptions {
  /** `redis://[user:pass@]host:port[/db]` (or `rediss://`). */
  readonly url: string;
  readonly replicaId: string;
  readonly keyPrefix: string;
  readonly heartbeatMs: number;
  readonly staleAfterMs: number;
  /** A Redis command slower than this fails (the replica goes on without it). */
  readonly commandTimeoutMs: number;
  /** Writes outstanding at once; above it changes wait and go out as one batch. */
  readonly maxPendingFlushes: number;
  /** Send pending requests' prompt block keys (default true; `replicas.shareKeys`). */
  readonly shareKeys?: boolean;
  readonly book: RemoteLoadBook;
  readonly nowMs: () => number;
  readonly logger: LogSink;
  /** Called after each peer operation is applied (benchmarks measure propagation). */
  readonly onRemoteOp?: (replica: string, op: SyncOp) => void;
}

export type ReplicaSyncState = "connecting" | "synced" | "catching_up" | "degraded";

export interface ReplicaSyncStatus {
  readonly replicaId: string;
  readonly state: ReplicaSyncState;
  /** Peers heard from within staleAfterMs → their in-flight requests known here. */
  readonly peers: Readonly<Record<string, number>>;
  readonly remoteRequests: number;
  readonly localRequests: number;
  /** Counters since start. */
  readonly publishedOps: number;
  readonly droppedOps: number;
  readonly failedFlushes: number;
  readonly routesWhileDegraded: number;
  readonly resyncs: number;
  readonly peerReloads: number;
  readonly messagesIn: number;
  readonly badMessages: number;
  readonly gaps: number;
  readonly droppedPeers: number;
  readonly disconnects: number;
  /** Messages from another process using this replica's id (a misconfiguration). */
  readonly idConflicts: number;
  /** Wall-clock ms of the last successful flush, null before the first. */
  readonly lastOkMs: number | null;
}

export class RedisLoadSync implements InFlightListener {
  readonly #o: RedisLoadSyncOptions;
  readonly #cmd: Redis;
  readonly #sub: Redis;
  readonly #hashKey: string;
  readonly #setKey: string;
  readonly #channel: string;
  readonly #instance = randomUUID();
  /** Our own in-flight requests, as published (the source of a full rewrite). */
  readonly #mine = new Map<string, SharedEntry>();
  #ops: SyncOp[] = [];
  #hdel: string[] = [];
  #scheduled = false;
  #pending = 0;
  #seq = 0;
  /** Redis may not hold what we hold: rewrite the whole hash at the next chance. */
  #dirty = true;
  #everReady = false;
  #failedSinceOk = false;
  #timer: NodeJS.Timeout | null = null;
  #closed = false;
  /**
   * Peers whose hash is being read → their operations heard meanwhile (re-applied after)
   * and whether another read was asked for meanwhile (it may see writes this one did not).
   */
  readonly #reloading = new Map<string, { readonly ops: SyncOp[]; again: boolean }>();
  readonly #c = {
    publishedOps: 0,
    droppedOps: 0,
    failedFlushes: 0,
    routesWhileDegraded: 0,
    resyncs: 0,
    peerReloads: 0,
    messagesIn: 0,
    badMessages: 0,
    gaps: 0,
    disconnects: 0,
    idConflicts: 0,
  };
  #lastOkMs: number | null = null;

  constructor(options: RedisLoadSyncOptions) {
    this.#o = options;
    const p = options.keyPrefix;
    this.#hashKey = `${p}:replica:${options.replicaId}`;
    this.#setKey = `${p}:replicas`;
    this.#channel = `${p}:load`;
    const common = {
      lazyConnect: true,
      // Fail fast instead of queueing without bound while Redis is away; we resync later.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: options.commandTimeoutMs,
      connectTimeout: Math.max(1000, options.commandTimeoutMs),
      retryStrategy: (times: number) => Math.min(50 * 2 ** Math.min(times, 5), 1000),
    };
    this.#cmd = new Redis(options.url, { ...common, connectionName: `kvrouter-${p}-cmd` });
    this.#sub = new Redis(options.url, {
      ...common,
      commandTimeout: undefined,
      connectionName: `kvrouter-${p}-sub`,
    });
    for (const [name, client] of [
      ["cmd", this.#cmd],
      ["sub", this.#sub],
    ] as const) {
      client.on("error", (err: Error) => {
        options.logger.debug({ err: err.message, conn: name }, "redis error");
      });
      client.on("close", () => {
        if (this.#closed) return;
        this.#c.disconnects++;
        this.#dirty = true;
        options.logger.warn(
          { conn: name, replica: options.replicaId },
          "redis connection lost: routing on local state until it returns",
        );
      });
    }
    this.#cmd.on("ready", () => this.#onReady("cmd"));
    this.#sub.on("ready", () => this.#onReady("sub"));
    this.#sub.on("message", (_ch: string, text: string) => this.#onMessage(text));
  }

  /** Connect and start heartbeats. Resolves at once: Redis being away is not an error. */
  start(): void {
    this.#timer = setInterval(() => this.#tick(), this.#o.heartbeatMs);
    this.#timer.unref();
    this.#cmd.connect().catch(() => {});
    // Subscribes on ready (`#onReady`): a first connection that fails rejects this, and
    // the one that succeeds later must still subscribe.
    this.#sub.connect().catch(() => {});
  }

  /**
   * Stop. `graceful` (the default) tells peers to forget our requests now and deletes
   * our hash; without it we vanish as a crash would (peers wait staleAfterMs).
   */
  async close(graceful = true): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#timer !== null) clearInterval(this.#timer);
    if (graceful && this.#cmd.status === "ready") {
      const leave = encodeMessage({
        replica: this.#o.replicaId,
        instance: this.#instance,
        seq: ++this.#seq,
        sentMs: this.#o.nowMs(),
        ops: [{ op: "leave" }],
      });
      await this.#cmd
        .multi()
        .del(this.#hashKey)
        .zrem(this.#setKey, this.#o.replicaId)
        .publish(this.#channel, leave)
        .exec()
        .catch(() => {});
    }
    this.#cmd.disconnect();
    this.#sub.disconnect();
  }

  get state(): ReplicaSyncState {
    if (!this.#everReady) return "connecting";
    if (this.#cmd.status !== "ready" || this.#sub.status !== "ready" || this.#failedSinceOk) {
      return "degraded";
    }
    return this.#dirty || this.#reloading.size > 0 ? "catching_up" : "synced";
  }

  status(): ReplicaSyncStatus {
    const s = this.#o.book.stats();
    return {
      replicaId: this.#o.replicaId,
      state: this.state,
      peers: s.replicas,
      remoteRequests: s.entries,
      localRequests: this.#mine.size,
      ...this.#c,
      droppedPeers: s.droppedReplicas,
      lastOkMs: this.#lastOkMs,
    };
  }

  // --- InFlightListener: called on the routing path, so they only queue ---

  added(entry: SharedEntry): void {
    if (this.state !== "synced") this.#c.routesWhileDegraded++;
    const e = this.#o.shareKeys === false ? withoutKeys(entry) : entry;
    this.#mine.set(e.id, e);
    this.#queue({ op: "add", entry: e });
  }

  firstToken(requestId: string): void {
    const e = this.#mine.get(requestId);
    if (e === undefined || !e.pending) return;
    this.#mine.set(requestId, { ...withoutKeys(e), pending: false });
    this.#queue({ op: "first", id: requestId });
  }

  done(requestId: string): void {
    if (!this.#mine.delete(requestId)) return;
    this.#queue({ op: "done", id: requestId });
  }

  workerRemoved(worker: WorkerKey): void {
    for (const [id, e] of this.#mine) if (e.worker === worker) this.done(id);
  }

  // --- sending ---

  /** `e` as it stands now: keys only while its prefill is pending here. */
  #current(e: SharedEntry): SharedEntry {
    const now = this.#mine.get(e.id);
    return now?.pending ? now : withoutKeys(now ?? e);
  }

  #queue(op: SyncOp): void {
    this.#ops.push(op);
    if (!this.#scheduled) {
      this.#scheduled = true;
      setImmediate(() => this.#flush(false));
    }
  }

  #flush(heartbeat: boolean): void {
    this.#scheduled = false;
    const ops = this.#ops;
    this.#ops = [];
    if (this.#closed || (ops.length === 0 && this.#hdel.length === 0 && !heartbeat)) return;
    if (this.#cmd.status !== "ready" || ops.length > MAX_QUEUED_OPS) {
      this.#c.droppedOps += ops.length;
      this.#dirty = true;
      return;
    }
    if (this.#pending >= this.#o.maxPendingFlushes) {
      // Redis is behind: keep the changes and send them as one batch when a write returns.
      this.#ops = ops.length === 0 ? this.#ops : ops.concat(this.#ops);
      return;
    }
    if (this.#dirty) {
      this.#rewrite();
      return;
    }
    const now = this.#o.nowMs();
    const pipe = this.#cmd.pipeline();
    // The hash gets each request this batch touched as it stands now, so that the order of
    // the batch's operations does not matter there: an id done and routed again (a
    // gateway retry keeps its request id) is set, not deleted after its set.
    const touched = new Set<string>(this.#hdel);
    this.#hdel = [];
    for (const o of ops) {
      if (o.op === "add") touched.add(o.entry.id);
      else if (o.op === "first" || o.op === "done") touched.add(o.id);
    }
    const set: string[] = [];
    const del: string[] = [];
    for (const id of touched) {
      const e = this.#mine.get(id);
      if (e === undefined) del.push(id);
      else set.push(id, encodeEntry(e));
    }
    // An add goes out as the request stands now: with its keys only while its prefill is
    // still pending here (a batch held back while Redis was slow may be old).
    const out = ops.map((o) => (o.op === "add" ? { op: o.op, entry: this.#current(o.entry) } : o));
    // In bounded commands: a long hold-back must not become one huge command, nor an
    // argument list too long to spread.
    for (const [a, b] of fieldRuns(set)) pipe.hset(this.#hashKey, ...set.slice(a, b));
    for (let i = 0; i < del.length; i += 4000) pipe.hdel(this.#hashKey, ...del.slice(i, i + 4000));
    pipe.pexpire(this.#hashKey, this.#o.staleAfterMs);
    pipe.zadd(this.#setKey, now, this.#o.replicaId);
    // Messages of at most ~1 MB: a subscriber's output buffer stays far below Redis's
    // pub/sub limit (32 MB) even after a long hold-back, and no string grows unbounded.
    for (const part of bySize(out, MAX_MESSAGE_BYTES)) {
      const msg = {
        replica: this.#o.replicaId,
        instance: this.#instance,
        seq: ++this.#seq,
        sentMs: now,
        ops: part,
      };
      pipe.publish(this.#channel, encodeMessage(msg));
    }
    this.#send(pipe, ops.length);
  }

  /** Replace our hash with the full local state in one transaction; peers re-read it. */
  #rewrite(): void {
    const now = this.#o.nowMs();
    this.#dirty = false;
    this.#hdel = [];
    this.#c.resyncs++;
    const tx = this.#cmd.multi().del(this.#hashKey);
    const fields: string[] = [];
    for (const e of this.#mine.values()) {
      if (e.expiresMs > now) fields.push(e.id, encodeEntry(e));
    }
    for (const [a, b] of fieldRuns(fields)) tx.hset(this.#hashKey, ...fields.slice(a, b));
    tx.pexpire(this.#hashKey, this.#o.staleAfterMs);
    tx.zadd(this.#setKey, now, this.#o.replicaId);
    const msg = {
      replica: this.#o.replicaId,
      instance: this.#instance,
      seq: ++this.#seq,
      sentMs: now,
      ops: [],
    };
    tx.publish(this.#channel, encodeMessage({ ...msg, ops: [{ op: "reload" }] }));
    this.#send(tx, 0);
  }

  #send(pipe: ReturnType<Redis["pipeline"]>, opCount: number): void {
    this.#pending++;
    pipe.exec().then(
      (results) => {
        this.#pending--;
        if (this.#ops.length > 0 && !this.#scheduled) {
          this.#scheduled = true;
          setImmediate(() => this.#flush(false));
        }
        const failed = results?.find(([err]) => err !== null);
        if (results === null || failed !== undefined) this.#flushFailed(opCount, failed?.[0]);
        else {
          this.#c.publishedOps += opCount;
          this.#lastOkMs = this.#o.nowMs();
          this.#failedSinceOk = false;
        }
      },
      (err: unknown) => {
        this.#pending--;
        this.#flushFailed(opCount, err);
      },
    );
  }

  #flushFailed(opCount: number, err: unknown): void {
    if (this.#closed) return;
    this.#c.failedFlushes++;
    this.#c.droppedOps += opCount;
    this.#dirty = true;
    if (!this.#failedSinceOk) {
      this.#o.logger.warn(
        { err: err instanceof Error ? err.message : String(err), replica: this.#o.replicaId },
        "redis write failed: routing on local state, will resync",
      );
    }
    this.#failedSinceOk = true;
  }

  #tick(): void {
    const now = this.#o.nowMs();
    // Our own requests past their deadline: peers drop them by the same deadline.
    for (const [id, e] of this.#mine) {
      if (e.expiresMs <= now) {
        this.#mine.delete(id);
        this.#hdel.push(id);
      } else if (e.prefixKeys !== undefined && e.prefillEndMs <= now) {
        this.#mine.set(id, withoutKeys(e)); // prefill assumed over: keys no longer matter
      }
    }
    this.#o.book.sweep(now);
    this.#flush(true);
  }

  // --- receiving ---

  #onReady(conn: "cmd" | "sub"): void {
    if (this.#closed) return;
    this.#everReady = true;
    this.#o.logger.info({ conn, replica: this.#o.replicaId }, "redis connected");
    // Every time, not only after the first connect: a Redis down at start made that
    // connect fail, and the subscription of a later one is what ioredis would restore on
    // reconnects (subscribing twice to a channel is harmless).
    if (conn === "sub") this.#sub.subscribe(this.#channel).catch(() => {});
    // Messages may have been missed while away: read every live peer's hash again.
    if (conn === "sub" || this.#cmd.status === "ready") this.#reloadAll();
    if (conn === "cmd") this.#flush(true);
  }

  #reloadAll(): void {
    if (this.#cmd.status !== "ready") return;
    const now = this.#o.nowMs();
    this.#cmd
      .zrangebyscore(this.#setKey, now - this.#o.staleAfterMs, "+inf")
      .then((ids) => {
        for (const id of ids) if (id !== this.#o.replicaId) this.#reload(id);
      })
      .catch(() => {});
  }

  #reload(replica: string): void {
    const running = this.#reloading.get(replica);
    if (running !== undefined) {
      // A rewrite announced (or a gap seen) now may postdate the read out: read again after.
      running.again = true;
      return;
    }
    if (this.#cmd.status !== "ready") return;
    this.#reloading.set(replica, { ops: [], again: false });
    this.#c.peerReloads++;
    const key = `${this.#o.keyPrefix}:replica:${replica}`;
    // With the hash's time to live: every write of its owner sets it to staleAfterMs, so
    // what is left of it dates the owner's last write without comparing clocks.
    this.#cmd
      .multi()
      .hgetall(key)
      .pttl(key)
      .exec()
      .then((results) => {
        const [read, ttl] = results ?? [];
        if (read === undefined || read[0] !== null || ttl === undefined || ttl[0] !== null) {
          return;
        }
        const fields = read[1] as Record<string, string>;
        const leftMs = ttl[1] as number;
        const entries: SharedEntry[] = [];
        for (const text of Object.values(fields)) {
          const e = decodeEntry(text);
          if (e === null) this.#c.badMessages++;
          else entries.push(e);
        }
        // An empty hash is a replica that left or expired: nothing to keep of it.
        if (entries.length === 0 && Object.keys(fields).length === 0) {
          if (!this.#o.book.has(replica)) return;
        }
        const now = this.#o.nowMs();
        // −1: no expiry (not written by a replica); −2: gone (then nothing to keep).
        const writtenMs =
          leftMs >= 0 ? now + leftMs - this.#o.staleAfterMs : leftMs === -1 ? now : -Infinity;
        this.#o.book.replace(replica, entries, now, writtenMs);
        // The read may have run before writes whose messages we already applied.
        for (const op of this.#reloading.get(replica)?.ops ?? []) this.#apply(replica, op, now);
      })
      .catch(() => {})
      .finally(() => {
        const again = this.#reloading.get(replica)?.again === true;
        this.#reloading.delete(replica);
        if (again && !this.#closed) this.#reload(replica);
      });
  }

  #onMessage(text: string): void {
    this.#c.messagesIn++;
    const m = decodeMessage(text);
    if (m === null) {
      this.#c.badMessages++;
      return;
    }
    if (m.replica === this.#o.replicaId) {
      if (m.instance !== this.#instance) {
        // Two processes share one id: each overwrites the other's hash. Say it loudly.
        if (this.#c.idConflicts++ === 0) {
          this.#o.logger.error(
            { replica: this.#o.replicaId },
            "another process uses this replicas.id: give every replica its own id",
          );
        }
      }
      return;
    }
    const book = this.#o.book;
    const now = this.#o.nowMs();
    const seen = book.heard(m.replica, m.seq, now);
    /** A read started for this message: it runs after the writes this message tells of. */
    let readSince = false;
    if (seen !== "next") {
      if (seen === "gap") this.#c.gaps++;
      readSince = !this.#reloading.has(m.replica);
      this.#reload(m.replica);
      readSince &&= this.#reloading.has(m.replica);
    }
    const buffer = this.#reloading.get(m.replica)?.ops;
    for (const op of m.ops) {
      if (!(op.op === "reload" && readSince)) this.#apply(m.replica, op, now);
      if (buffer !== undefined && op.op !== "reload") buffer.push(op);
      this.#o.onRemoteOp?.(m.replica, op);
    }
  }

  #apply(replica: string, op: SyncOp, now: number): void {
    const book = this.#o.book;
    switch (op.op) {
      case "add":
        book.add(replica, op.entry, now);
        break;
      case "first":
        book.firstToken(replica, op.id);
        break;
      case "done":
        book.done(replica, op.id, now);
        break;
      case "reload":
        this.#reload(replica);
        break;
      case "leave":
        book.drop(replica);
        break;
    }
  }
}

/** Largest message (and hash write) this replica sends, bytes, about. */
const MAX_MESSAGE_BYTES = 1 << 20;

/** An operation's encoded size, about: keys are base64 (4 chars per 3 bytes). */
function opBytes(o: SyncOp): number {
  // Ids and worker keys counted as JSON may escape them (up to 6 bytes a character).
  if (o.op !== "add") return 48 + ("id" in o ? 6 * o.id.length : 0);
  const k = o.entry.prefixKeys;
  return (
    160 +
    6 * (o.entry.id.length + o.entry.worker.length) +
    (k === undefined ? 0 : (k.length * 16) / 3)
  );
}

/** `[from, to)` runs of (field, value) pairs of at most 4,000 words and about 1 MB each. */
function* fieldRuns(fields: readonly string[]): Generator<[number, number]> {
  for (let i = 0; i < fields.length; ) {
    let bytes = 0;
    let j = i;
    while (j < fields.length && j - i < 4000 && bytes < MAX_MESSAGE_BYTES) {
      bytes += fields[j]!.length + fields[j + 1]!.length;
      j += 2;
    }
    yield [i, j];
    i = j;
  }
}

/** `ops` in consecutive parts of at most about `max` bytes (one part if empty). */
export function bySize(ops: readonly SyncOp[], max: number): SyncOp[][] {
  const parts: SyncOp[][] = [[]];
  let bytes = 0;
  for (const o of ops) {
    const b = opBytes(o);
    if (bytes + b > max && parts.at(-1)!.length > 0) {
      parts.push([]);
      bytes = 0;
    }
    parts.at(-1)!.push(o);
    bytes += b;
  }
  return parts;
}
