/**
 * A fleet of simulated workers driven by the event queue. Each worker has the
 * simulator's paged prefix cache (behind `WorkerCache`), a FIFO waiting queue, one
 * prefill at a time and up to `maxNumSeqs` running requests (see `timing-model.ts`).
 * The fleet knows nothing of routing: a policy picks the worker, the fleet runs it and
 * reports first tokens, completions and the caches' KV events through `FleetHooks`.
 *
 * Why not `sim/engine.ts`: that engine streams real tokens (a timer per decode step, an
 * event batch per step, preemption when a decode step finds no block); the replay needs
 * two events per request (first token, done) to stay within its budget — driving the
 * engine would multiply events by the output length (docs/replay.md, "Replay budget"). Both take their rules and defaults from
 * `sim/timing.ts`. The per-worker state here is `ReplayWorker`, not the simulator's
 * `sim/sim-worker.ts` (the sim-worker process).
 */

import type { EventQueue } from "./event-queue.js";
import { decodeMs, prefillMs, type TimingModel } from "./timing-model.js";
import type { TraceRequest } from "./trace.js";

/** One worker's KV cache as the fleet drives it (see `worker-cache.ts`). */
export interface WorkerCache {
  /** Total KV blocks. */
  readonly capacityBlocks: number;
  /** Fraction of blocks held by requests (vLLM's kv_cache_usage_perc), 0..1. */
  usage(): number;
  /**
   * Start request `id`: look up and pin its cached prefix, allocate blocks for the rest
   * and register the prompt's full blocks as cached (announcing them).
   * Returns the prompt tokens served from cache, or null when the blocks do not fit now.
   */
  admit(id: number, tokens: readonly number[]): number | null;
  /** The request is done: its blocks stay cached but become evictable. */
  release(id: number): void;
}

/** What happened to one request. Times are virtual ms. */
export interface RequestOutcome {
  readonly index: number;
  readonly worker: number;
  readonly arrivalMs: number;
  readonly inputTokens: number;
  readonly outputTokens: number;
  /** Prompt tokens served from the worker's prefix cache. */
  hitTokens: number;
  startMs: number;
  firstTokenMs: number;
  doneMs: number;
  /** The prompt can never fit this worker's cache; it was dropped. */
  rejected: boolean;
}

/** Per-worker counters. */
export interface WorkerStats {
  prefillTokens: number;
  hitTokens: number;
  prefillBusyMs: number;
  requests: number;
  lastPrefillEndMs: number;
}

/** A worker's state as an engine's /metrics would show it. */
export interface WorkerLoad {
  readonly running: number;
  readonly waiting: number;
  readonly kvUsage: number;
}

export interface FleetHooks {
  onFirstToken?(outcome: RequestOutcome): void;
  onDone?(outcome: RequestOutcome): void;
  /** The prompt can never fit the worker's cache: dropped without running. */
  onRejected?(outcome: RequestOutcome): void;
}

interface Pending {
  readonly req: TraceRequest;
  readonly tokens: readonly number[];
  readonly outcome: RequestOutcome;
}

// FIFO: see util (a shared moving-head queue is being written in src/util/; use it here).
class ReplayWorker {
  readonly waiting: Pending[] = [];
  #head = 0;
  running = 0;
  prefillBusy = false;
  readonly stats: WorkerStats = {
    prefillTokens: 0,
    hitTokens: 0,
    prefillBusyMs: 0,
    requests: 0,
    lastPrefillEndMs: 0,
  };

  constructor(
    readonly index: number,
    readonly cache: WorkerCache,
  ) {}

  get waitingCount(): number {
    return this.waiting.length - this.#head;
  }

  peek(): Pending | undefined {
    return this.waiting[this.#head];
  }

  shift(): void {
    this.waiting[this.#head++] = undefined as unknown as Pending;
    if (this.#head > 1024 && this.#head * 2 > this.waiting.length) {
      this.waiting.splice(0, this.#head);
      this.#head = 0;
    }
  }
}

export class SimFleet {
  readonly #q: EventQueue;
  readonly #timing: TimingModel;
  readonly #hooks: FleetHooks;
  readonly #workers: ReplayWorker[];
  #rejected = 0;

  constructor(
    q: EventQueue,
    timing: TimingModel,
    caches: readonly WorkerCache[],
    hooks: FleetHooks = {},
  ) {
    if (caches.length === 0) throw new RangeError("a fleet needs at least one worker");
    this.#q = q;
    this.#timing = timing;
    this.#hooks = hooks;
    this.#workers = caches.map((c, i) => new ReplayWorker(i, c));
  }

  get size(): number {
    return this.#workers.length;
  }

  get rejected(): number {
    return this.#rejected;
  }

  /** Requests on a worker not yet done (queued + running). */
  outstanding(worker: number): number {
    const w = this.#workers[worker]!;
    return w.running + w.waitingCount;
  }

  load(worker: number): WorkerLoad {
    const w = this.#workers[worker]!;
    return { running: w.running, waiting: w.waitingCount, kvUsage: w.cache.usage() };
  }

  stats(worker: number): Readonly<WorkerStats> {
    return this.#workers[worker]!.stats;
  }

  /** Hand a request to `worker` now; returns the outcome record the fleet will fill in. */
  submit(req: TraceRequest, tokens: readonly number[], worker: number): RequestOutcome {
    const w = this.#workers[worker];
    if (w === undefined) throw new RangeError(`no worker ${worker} in a fleet of ${this.size}`);
    const outcome: RequestOutcome = {
      index: req.index,
      worker,
      arrivalMs: this.#q.now,
      inputTokens: req.inputLength,
      outputTokens: req.outputLength,
      hitTokens: 0,
      startMs: Number.NaN,
      firstTokenMs: Number.NaN,
      doneMs: Number.NaN,
      rejected: false,
    };
    w.waiting.push({ req, tokens, outcome });
    this.#pump(w);
    return outcome;
  }

  /** Start as many queued requests as the worker's rules allow (FCFS, no skipping). */
  #pump(w: ReplayWorker): void {
    const t = this.#timing;
    while (!w.prefillBusy && w.running < t.maxNumSeqs) {
      const p = w.peek();
      if (p === undefined) return;
      const hit = w.cache.admit(p.req.index, p.tokens);
      if (hit === null) {
        if (w.running > 0) return; // wait for a request to free its blocks
        // Nothing running and still no room: the prompt is larger than the cache.
        w.shift();
        p.outcome.rejected = true;
        this.#rejected++;
        this.#hooks.onRejected?.(p.outcome);
        continue;
      }
      w.shift();
      this.#start(w, p, hit);
    }
  }

  #start(w: ReplayWorker, p: Pending, hit: number): void {
    const now = this.#q.now;
    const uncached = p.req.inputLength - hit;
    const duration = prefillMs(this.#timing, uncached);
    const o = p.outcome;
    o.hitTokens = hit;
    o.startMs = now;
    w.running++;
    w.prefillBusy = true;
    w.stats.requests++;
    w.stats.prefillTokens += uncached;
    w.stats.hitTokens += hit;
    w.stats.prefillBusyMs += duration;
    this.#q.schedule(now + duration, () => {
      w.prefillBusy = false;
      w.stats.lastPrefillEndMs = this.#q.now;
      o.firstTokenMs = this.#q.now;
      this.#hooks.onFirstToken?.(o);
      this.#q.after(decodeMs(this.#timing, p.req.outputLength), () => {
        o.doneMs = this.#q.now;
        w.cache.release(p.req.index);
        w.running--;
        this.#hooks.onDone?.(o);
        this.#pump(w);
      });
      this.#pump(w);
    });
  }
}
