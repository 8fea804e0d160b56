/**
 * The `kv` policy as N active-active router replicas (`kvrouter replay --replicas N
 * --replica-sync on|off`, docs/replicas.md): clients are spread round-robin over the
 * replicas; every replica has the full index (each engine's KV events fan out to all, as
 * ZeroMQ PUB does) and scrapes every worker, but keeps its own in-flight bookkeeping.
 *
 * With sync on, each replica's in-flight changes (route, first token, done) reach every
 * other replica's `RemoteLoadBook` — the service's own class, read by the router as
 * `extraLoad` exactly as in `replica-sharing.ts` — after a sampled delay: log-normal
 * with the given p50 and p99 (measured on loopback Redis: p50 0.25–2.4 ms, p99 7–139 ms,
 * docs/scaling.md), in order per sender and receiver, as Redis pub/sub delivers them.
 * Heartbeats are taken as always arriving (Redis up). With sync off a replica never
 * learns of the others' decisions: the loss that sharing exists to prevent.
 */

import { FIELDS } from "../config/fields.js";
import { RadixTreeIndex } from "../index/radix-tree.js";
import { InFlightTracker } from "../load/in-flight.js";
import { LoadTracker } from "../load/load-tracker.js";
import type { KvEvent } from "../protocol/events.js";
import type { WorkerKey } from "../protocol/worker.js";
import { RemoteLoadBook } from "../replicas/remote-load-book.js";
import { type InFlightListener, SharedInFlightTracker } from "../replicas/shared-in-flight.js";
import type { SharedEntry } from "../replicas/wire.js";
import { Router } from "../router.js";
import type { SchedulerConfig } from "../scheduler/types.js";
import { deriveSeed, type Rng, seededRng } from "../util/rng.js";
import { applyScrape, simRegistry } from "./kv-policy.js";
import type { RoutingPolicy, ScrapedLoad } from "./policies.js";
import type { RequestOutcome } from "./sim-fleet.js";
import type { TraceRequest } from "./trace.js";

export interface ReplicaSyncModel {
  /** Router replicas (≥ 1). */
  readonly replicas: number;
  /** Whether replicas share their in-flight load (through Redis in the service). */
  readonly sync: boolean;
  /** Delay from one replica's change to another applying it, median and 99th percentile. */
  readonly syncP50Ms: number;
  readonly syncP99Ms: number;
}

export interface ReplicatedKvOptions extends ReplicaSyncModel {
  readonly workers: number;
  readonly blockSize: number;
  readonly capacityBlocks: number;
  readonly config: SchedulerConfig;
  readonly seed: number;
  /**
   * Test-only: every replica draws its tie-breaks from one random stream (the one router's),
   * instead of each its own as separate processes would. With a zero sync delay the
   * replicas then make exactly one router's decisions; separate streams differ by ties.
   */
  readonly sharedRng?: boolean;
}

interface Replica {
  readonly id: string;
  readonly router: Router;
  readonly index: RadixTreeIndex;
  readonly loads: LoadTracker;
  readonly inFlight: InFlightTracker;
  readonly book: RemoteLoadBook | null;
  readonly keys: readonly WorkerKey[];
  readonly indexOf: ReadonlyMap<WorkerKey, number>;
}

interface Delivery {
  readonly at: number;
  readonly order: number;
  readonly run: () => void;
}

/** Inverse of the standard normal CDF at 0.99. */
const Z99 = 2.3263478740408408;

export class ReplicatedKvPolicy implements RoutingPolicy {
  readonly name = "kv";
  readonly wantsKvEvents = true;
  readonly #r: Replica[] = [];
  readonly #owner = new Map<number, Replica>();
  readonly #queue: Delivery[] = []; // min-heap on (at, order)
  readonly #lastAt = new Map<string, number>(); // sender→receiver: FIFO like pub/sub
  readonly #delayRng: Rng;
  readonly #mu: number;
  readonly #sigma: number;
  /** p99 0: every change reaches the others before the next request is routed. */
  readonly #zeroDelay: boolean;
  #order = 0;
  #next = 0;
  #now = 0;
  #lastSweep = -Infinity;
  /** Sync messages delivered, and their delays (ms), for the report. */
  readonly delivered: number[] = [];

  constructor(o: ReplicatedKvOptions) {
    if (!(o.replicas >= 1)) throw new RangeError("replicas must be ≥ 1");
    if (!(o.syncP50Ms >= 0 && o.syncP99Ms >= o.syncP50Ms)) {
      throw new RangeError("sync delay: need 0 ≤ p50 ≤ p99");
    }
    this.#delayRng = seededRng(deriveSeed(o.seed, "replica-sync"));
    this.#zeroDelay = o.syncP99Ms === 0;
    this.#mu = Math.log(Math.max(o.syncP50Ms, 1e-6));
    this.#sigma = o.syncP50Ms > 0 ? Math.log(o.syncP99Ms / o.syncP50Ms) / Z99 : 0;
    const sync = o.sync && o.replicas > 1;
    const shared = o.sharedRng === true ? seededRng(deriveSeed(o.seed, "kv")) : null;
    for (let i = 0; i < o.replicas; i++) {
      const id = `r${i}`;
      const { registry, keys, indexOf } = simRegistry(o.workers, o.blockSize, o.capacityBlocks);
      const index = new RadixTreeIndex({ blockSize: o.blockSize });
      const loads = new LoadTracker({ staleAfterMs: FIELDS.load.staleAfterMs.default });
      const inFlightConfig = {
        prefillTtlMs: FIELDS.inFlight.prefillTtlMs.default,
        ttlMs: FIELDS.inFlight.ttlMs.default,
      };
      const inFlight = sync
        ? new SharedInFlightTracker(inFlightConfig, this.#listener(id))
        : new InFlightTracker(inFlightConfig);
      const book = sync
        ? new RemoteLoadBook({ staleAfterMs: FIELDS.replicas.staleAfterMs.default })
        : null;
      const router = new Router({
        index,
        registry,
        loads,
        inFlight,
        config: o.config,
        // Replica 0 draws what the single router draws: --replicas 1 is the plain kv run.
        rng: shared ?? seededRng(deriveSeed(o.seed, i === 0 ? "kv" : `kv-replica-${i}`)),
        ...(book === null ? {} : { extraLoad: book }),
      });
      this.#r.push({ id, router, index, loads, inFlight, book, keys, indexOf });
    }
  }

  /** Index apply outcomes other than "applied", over all replicas (should stay empty). */
  readonly eventProblems = new Map<string, number>();

  choose(req: TraceRequest, tokens: readonly number[], nowMs: number): number {
    this.#advance(nowMs);
    const r = this.#r[this.#next]!;
    this.#next = (this.#next + 1) % this.#r.length;
    if (r.book !== null && nowMs - this.#lastSweep >= 100) {
      for (const x of this.#r) {
        if (x.book === null) continue;
        for (const peer of this.#r) if (peer !== x) x.book.heard(peer.id, 0, nowMs);
        x.book.sweep(nowMs);
      }
      this.#lastSweep = nowMs;
    }
    const res = r.router.route({ tokenIds: tokens, requestId: String(req.index) }, nowMs);
    if (!res.ok) throw new Error(`router refused request ${req.index}: ${res.error.message}`);
    this.#owner.set(req.index, r);
    return r.indexOf.get(res.decision.worker)!;
  }

  onKvEvent(w: number, event: KvEvent, nowMs = 0): void {
    this.#advance(nowMs);
    for (const r of this.#r) {
      const s = r.index.applyEvent(r.keys[w]!, event).status;
      if (s !== "applied") this.eventProblems.set(s, (this.eventProblems.get(s) ?? 0) + 1);
    }
  }

  onScrape(w: number, load: ScrapedLoad, nowMs: number): void {
    this.#advance(nowMs);
    for (const r of this.#r) applyScrape(r.loads, r.keys[w]!, load, nowMs);
  }

  onFirstToken(o: RequestOutcome, nowMs: number): void {
    this.#advance(nowMs);
    this.#owner.get(o.index)?.inFlight.firstToken(String(o.index), nowMs);
  }

  onDone(o: RequestOutcome, nowMs: number): void {
    this.#advance(nowMs);
    this.#owner.get(o.index)?.inFlight.done(String(o.index), nowMs);
    this.#owner.delete(o.index);
  }

  /** Delay percentiles of the sync messages delivered so far (ms). */
  delayStats(): { readonly messages: number; readonly p50Ms: number; readonly p99Ms: number } {
    const d = [...this.delivered].sort((a, b) => a - b);
    const at = (q: number) =>
      d.length === 0 ? 0 : d[Math.min(d.length - 1, Math.floor(q * d.length))]!;
    return { messages: d.length, p50Ms: at(0.5), p99Ms: at(0.99) };
  }

  /** What replica `from` tells the others: each change, after its own sampled delay. */
  #listener(from: string): InFlightListener {
    const send = (apply: (book: RemoteLoadBook, atMs: number) => void) => {
      for (const r of this.#r) {
        if (r.id === from || r.book === null) continue;
        const link = `${from}>${r.id}`;
        const delay = this.#zeroDelay ? 0 : this.#sigma === 0 ? Math.exp(this.#mu) : this.#sample();
        const at = Math.max(this.#now + delay, this.#lastAt.get(link) ?? 0);
        this.#lastAt.set(link, at);
        const book = r.book;
        this.delivered.push(at - this.#now);
        this.#push({ at, order: this.#order++, run: () => apply(book, at) });
      }
    };
    return {
      added: (e: SharedEntry) => send((book, at) => book.add(from, e, at)),
      firstToken: (id) => send((book) => book.firstToken(from, id)),
      done: (id) => send((book, at) => book.done(from, id, at)),
      workerRemoved: () => {},
    };
  }

  /** Log-normal delay: exp(mu + sigma·z), z standard normal (Box–Muller). */
  #sample(): number {
    const u = 1 - this.#delayRng();
    const v = this.#delayRng();
    const z = Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
    return Math.exp(this.#mu + this.#sigma * z);
  }

  /** Applies every sync message due by `nowMs`, in time order. */
  #advance(nowMs: number): void {
    const q = this.#queue;
    while (q.length > 0 && q[0]!.at <= nowMs) {
      const d = this.#pop();
      this.#now = d.at;
      d.run();
    }
    this.#now = nowMs;
  }

  #push(d: Delivery): void {
    const q = this.#queue;
    q.push(d);
    for (let i = q.length - 1; i > 0; ) {
      const p = (i - 1) >> 1;
      if (!before(q[i]!, q[p]!)) break;
      [q[i], q[p]] = [q[p]!, q[i]!];
      i = p;
    }
  }

  #pop(): Delivery {
    const q = this.#queue;
    const top = q[0]!;
    const last = q.pop()!;
    if (q.length > 0) {
      q[0] = last;
      for (let i = 0; ; ) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < q.length && before(q[l]!, q[m]!)) m = l;
        if (r < q.length && before(q[r]!, q[m]!)) m = r;
        if (m === i) break;
        [q[i], q[m]] = [q[m]!, q[i]!];
        i = m;
      }
    }
    return top;
  }
}

const before = (a: Delivery, b: Delivery) => a.at < b.at || (a.at === b.at && a.order < b.order);
