/**
 * A small pool of worker threads that tokenize off the event loop: large texts (`tryEncode`)
 * or whole requests (`tryRun`: template, segment cache and encoding all on the worker, so
 * the gateway's event loop keeps only HTTP, routing and ingest). Workers are started on
 * first use (or `warm()`) and load the model themselves (~0.5 s for Qwen3); until a worker
 * is ready, both answer null and the caller tokenizes on its own thread. A request goes to
 * the worker its affinity key names (each worker has its own segment cache, so a
 * conversation's turns should meet the same one). `close()` terminates the workers and
 * fails the jobs still waiting.
 *
 * Long file: the queue rules (large jobs, the ms budget, the work cap, the learned rate)
 * are only sound together with the sends and answers that keep their counters.
 */

import { type EventLoopUtilization, performance } from "node:perf_hooks";
import type { Worker } from "node:worker_threads";
import { siblingModule, startWorkerThread } from "../worker-thread.js";
import type { EncodeJob, EncodeReply, EncodeWorkerData, RequestJob } from "./encode-worker.js";
import { TokenizeError } from "./types.js";

const WORKER_URL = siblingModule(import.meta.url, "encode-worker");

export interface PoolState {
  readonly started: number;
  readonly ready: number;
  readonly jobs: number;
  /** Threads that died (each restarted after a growing delay). */
  readonly deaths: number;
}

interface Slot {
  readonly worker: Worker;
  ready: boolean;
  busy: number;
  /** Characters of the large jobs (at or past the caller's threshold) not yet answered. */
  largeChars: number;
  /** Estimated thread time of the other jobs not yet answered (ms). */
  queuedMs: number;
  /** Work (`tryRun`'s `work`, at least `JOB_MIN_WORK` each) of the other jobs not yet answered. */
  queuedWork: number;
  /** Ordinary (not large) jobs not yet answered. */
  queuedJobs: number;
  /**
   * Thread time per character of work (`tryRun`'s `work`: what the thread reads) of the
   * jobs under the threshold, a moving average (ms).
   */
  msPerChar: number;
}

interface Pending {
  readonly slot: Slot;
  readonly chars: number;
  /** What the thread processes, in characters (or bytes of a body): sizes its estimate. */
  readonly work: number;
  /** A large job: counted in `largeChars`; else its estimate is in `queuedMs`. */
  readonly large: boolean;
  readonly estMs: number;
  resolve(reply: { ids: Int32Array[]; cached: number }): void;
  reject(err: Error): void;
}

/**
 * A request smaller than the caller's off-thread threshold does not wait behind more than
 * this many characters of large jobs (at or past the threshold) on a thread: past it, it is
 * tokenized on the caller's thread instead (`tryRun` answers null), so one huge prompt
 * does not hold up every small request behind it.
 */
export const QUEUE_BUDGET_CHARS = 256 * 1024;

/**
 * Nor behind more than this much estimated work of ordinary jobs (ms of thread time, from
 * what the thread's recent jobs took per character) while the caller's event loop has
 * time to spare (`LOOP_BUSY`): the event loop serves every other request, so a request
 * waits this long for the thread (16 queued 8k-token chats whose history the segment
 * cache holds are ~25 ms) before it costs the event loop its tokenization, and an event
 * loop that is itself busy takes none on. Counted in characters before (256k, about seven
 * such chats), a closed loop of 16 clients sent every other chat to the event loop.
 */
export const QUEUE_BUDGET_MS = 40;

/**
 * And never behind more than this much work of ordinary jobs (characters, or a body's
 * bytes), however busy the caller's event loop: the estimate in ms comes from the rate the
 * thread's recent jobs had, and a burst of cold chats after warm ones (60× the rate) or a
 * busy event loop (which skips the ms budget) would otherwise queue without bound — 1000
 * of 1000 ordinary chats onto one thread, or ~2.4 s of cold work. 512k is 17 chats of
 * 30k characters (a closed loop of 16 clients' 8k-token chats fits), about 0.3 s for the
 * thread at the cold rate and ~5-10 ms at the cached one.
 */
export const QUEUE_CAP_WORK = 512 * 1024;

/**
 * And never more than this many ordinary jobs queued on a thread: every job has a fixed
 * cost the per-character rate does not see (its message, its template), so tiny jobs
 * (a two-character completion; each counts `JOB_MIN_WORK` toward the cap above) would
 * otherwise still queue by the thousand.
 */
export const QUEUE_CAP_JOBS = 256;

/**
 * The event loop's utilization (`performance.eventLoopUtilization`, over the last 100 ms
 * or more) from which it is too busy to tokenize an ordinary request the thread is late
 * with: the request waits for the thread instead.
 */
export const LOOP_BUSY = 0.5;
const LOOP_WINDOW_MS = 100;

/** Thread time per character assumed before a thread has answered: a cold encoding's. */
const COLD_MS_PER_CHAR = 0.0006;
/** Weight of each answered job in `msPerChar`. */
const RATE_WEIGHT = 0.2;
/**
 * The rate is learned only from jobs of at least this much work: below it the thread's
 * fixed cost per job (the message, the template, parsing) dominates, and a tiny chat that
 * took 5 ms would read as a rate 10^4 times the real one.
 */
const RATE_MIN_WORK = 1024;
/** Each job moves the rate by at most this factor's worth (its sample is clamped to it). */
const RATE_CLAMP = 4;
/** A job's estimate counts at least this much work (the fixed cost of any job). */
const JOB_MIN_WORK = 256;

/** Restart delays after a thread dies: doubling from 1 s to 60 s, reset by a ready thread. */
const RESTART_MIN_MS = 1000;
const RESTART_MAX_MS = 60_000;

/** A whole request's ids from a worker. */
export interface RunResult {
  readonly ids: Int32Array;
  readonly cached: number;
}

export interface EncodePoolOptions {
  /**
   * The caller's event-loop utilization now (0..1); default: measured over the last
   * 100 ms or more. Tests inject it (a real busy loop depends on the machine's load).
   */
  readonly loopUtilization?: () => number;
}

export class EncodePool {
  readonly #data: EncodeWorkerData;
  readonly #size: number;
  readonly #workerUrl: URL;
  readonly #slots: Slot[] = [];
  readonly #pending = new Map<number, Pending>();
  #nextId = 1;
  #jobs = 0;
  #closed = false;
  #deaths = 0;
  /** No thread is started before this time (ms, `Date.now`): backoff after deaths. */
  #restartAt = 0;
  #restartDelay = 0;
  /** The event loop's utilization sample, when it was taken, and the last window's value. */
  #loopSample: EventLoopUtilization = performance.eventLoopUtilization();
  #loopAt = performance.now();
  #loopUtilization = 0;
  readonly #injectedUtilization: (() => number) | undefined;

  /** `workerUrl`: the thread's module (default `encode-worker`; tests give a failing one). */
  constructor(
    data: EncodeWorkerData,
    size: number,
    workerUrl: URL = WORKER_URL,
    options: EncodePoolOptions = {},
  ) {
    this.#data = data;
    this.#size = size;
    this.#workerUrl = workerUrl;
    this.#injectedUtilization = options.loopUtilization;
  }

  /** Starts the workers if they are not yet started (they load in the background). */
  warm(): void {
    if (this.#closed || Date.now() < this.#restartAt) return;
    while (this.#slots.length < this.#size) {
      const worker = startWorkerThread(this.#workerUrl, { workerData: this.#data });
      const slot: Slot = {
        worker,
        ready: false,
        busy: 0,
        largeChars: 0,
        queuedMs: 0,
        queuedWork: 0,
        queuedJobs: 0,
        msPerChar: COLD_MS_PER_CHAR,
      };
      worker.on("message", (m: EncodeReply | { ready: true }) => {
        if ("ready" in m) {
          slot.ready = true;
          this.#restartDelay = 0;
          return;
        }
        if (--slot.busy === 0) worker.unref();
        const p = this.#pending.get(m.id);
        this.#pending.delete(m.id);
        if (p !== undefined) this.#settled(p, "ms" in m ? m.ms : undefined);
        if ("error" in m) p?.reject(new TokenizeError(m.code ?? "bad_request", m.error));
        else p?.resolve({ ids: m.ids, cached: m.cached ?? 0 });
      });
      // A worker that dies takes its own jobs with it (they fail as `closed`: the caller
      // routes them on load alone; other threads' jobs go on) and leaves the pool. Another
      // is started on a later call, after a delay that doubles with each death in a row
      // (1 s … 60 s): a thread that cannot load its model is not restarted per request.
      // Until one is ready, calls tokenize on their own thread instead of waiting.
      const lost = (err: Error) => {
        const i = this.#slots.indexOf(slot);
        if (i < 0) return;
        this.#slots.splice(i, 1);
        this.#deaths++;
        this.#restartDelay = Math.min(
          RESTART_MAX_MS,
          Math.max(RESTART_MIN_MS, 2 * this.#restartDelay),
        );
        this.#restartAt = Date.now() + this.#restartDelay;
        this.#fail(err, slot);
      };
      worker.on("error", (err: unknown) => lost(err as Error));
      worker.on("exit", (code) => lost(new Error(`tokenizer thread exited (${code})`)));
      worker.unref();
      this.#slots.push(slot);
    }
  }

  /** Ids of each text from the least busy ready worker, or null when none is ready yet. */
  tryEncode(texts: readonly string[]): Promise<Int32Array[]> | null {
    if (this.#closed) return Promise.reject(new TokenizeError("closed", "tokenizer is closed"));
    this.warm();
    let best: Slot | null = null;
    for (const s of this.#slots) if (s.ready && (best === null || s.busy < best.busy)) best = s;
    if (best === null) return null;
    const chars = texts.reduce((n, t) => n + t.length, 0);
    return this.#send(best, chars, chars, true, (id) => ({ id, texts })).then((r) => r.ids);
  }

  /**
   * A whole request (about `chars` characters of text, `work` characters or bytes read by
   * the thread: a body's bytes, tools and documents included) tokenized on the worker `affinity`
   * names (the next ready one while it loads, or while the request is under
   * `waitAnywayChars` and the worker has more than `QUEUE_BUDGET_CHARS` of large jobs, more
   * than `QUEUE_CAP_WORK` of ordinary work, or more than `QUEUE_BUDGET_MS` of estimated
   * work and the event loop has time to spare),
   * or null when none qualifies: the caller tokenizes it itself.
   */
  tryRun(
    /** The job, or what makes it once a worker takes it (a body's copy is made only then). */
    request: RequestJob | (() => RequestJob),
    affinity: number,
    chars = 0,
    waitAnywayChars = Number.POSITIVE_INFINITY,
    work = chars,
  ): Promise<RunResult> | null {
    if (this.#closed) return Promise.reject(new TokenizeError("closed", "tokenizer is closed"));
    this.warm();
    const n = this.#slots.length;
    if (n === 0) return null;
    const home = affinity % n;
    const waits = chars < waitAnywayChars;
    let slot: Slot | null = null;
    for (let k = 0; k < n && slot === null; k++) {
      const s = this.#slots[(home + k) % n]!;
      if (
        s.ready &&
        (!waits ||
          (s.largeChars <= QUEUE_BUDGET_CHARS &&
            s.queuedWork <= QUEUE_CAP_WORK &&
            s.queuedJobs < QUEUE_CAP_JOBS &&
            (s.queuedMs <= QUEUE_BUDGET_MS || this.#loopBusy())))
      ) {
        slot = s;
      }
    }
    if (slot === null) return null;
    const job = typeof request === "function" ? request() : request;
    // A chat's body crosses as its bytes, transferred (the caller's copy is not used again).
    const transfer = job.kind === "chatBody" ? [job.body.buffer as ArrayBuffer] : [];
    const size = Math.max(work, chars);
    return this.#send(slot, chars, size, !waits, (id) => ({ id, request: job }), transfer).then(
      (r) => ({
        ids: r.ids[0]!,
        cached: r.cached,
      }),
    );
  }

  /** Whether the caller's event loop is busier than `LOOP_BUSY` over its last window. */
  #loopBusy(): boolean {
    if (this.#injectedUtilization !== undefined) return this.#injectedUtilization() > LOOP_BUSY;
    const now = performance.now();
    if (now - this.#loopAt >= LOOP_WINDOW_MS) {
      const elu = performance.eventLoopUtilization();
      this.#loopUtilization = performance.eventLoopUtilization(elu, this.#loopSample).utilization;
      this.#loopSample = elu;
      this.#loopAt = now;
    }
    return this.#loopUtilization > LOOP_BUSY;
  }

  #send(
    slot: Slot,
    chars: number,
    work: number,
    large: boolean,
    job: (id: number) => EncodeJob,
    transfer: ArrayBuffer[] = [],
  ): Promise<{ ids: Int32Array[]; cached: number }> {
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      try {
        slot.worker.postMessage(job(id), transfer);
      } catch (err) {
        // Not cloneable (library callers only: the gateway's requests are parsed JSON).
        reject(new TokenizeError("bad_request", (err as Error).message));
        return;
      }
      this.#jobs++;
      if (slot.busy++ === 0) slot.worker.ref();
      const estMs = large ? 0 : Math.max(work, JOB_MIN_WORK) * slot.msPerChar;
      if (large) slot.largeChars += chars;
      else {
        slot.queuedMs += estMs;
        slot.queuedWork += Math.max(work, JOB_MIN_WORK);
        slot.queuedJobs++;
      }
      this.#pending.set(id, { slot, chars, work, large, estMs, resolve, reject });
    });
  }

  /** A job answered (or failed): off its slot's queue; its time teaches the slot's rate. */
  #settled(p: Pending, ms: number | undefined): void {
    const s = p.slot;
    if (p.large) s.largeChars -= p.chars;
    else {
      s.queuedMs = s.busy === 0 ? 0 : Math.max(0, s.queuedMs - p.estMs);
      s.queuedWork = s.busy === 0 ? 0 : Math.max(0, s.queuedWork - Math.max(p.work, JOB_MIN_WORK));
      s.queuedJobs = s.busy === 0 ? 0 : Math.max(0, s.queuedJobs - 1);
      if (ms !== undefined && p.work >= RATE_MIN_WORK) {
        const r = s.msPerChar;
        const sample = Math.min(RATE_CLAMP * r, Math.max(r / RATE_CLAMP, ms / p.work));
        s.msPerChar += RATE_WEIGHT * (sample - r);
      }
    }
  }

  /** Fails the jobs waiting on `slot` (all of them when null). */
  #fail(err: Error, slot: Slot | null): void {
    for (const [id, p] of this.#pending) {
      if (slot !== null && p.slot !== slot) continue;
      this.#pending.delete(id);
      p.reject(new TokenizeError("closed", err.message));
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#fail(new Error("tokenizer closed"), null);
    await Promise.all(this.#slots.map((s) => s.worker.terminate()));
    this.#slots.length = 0;
  }

  /** Workers started, how many are ready, and jobs sent to them so far. */
  state(): PoolState {
    return {
      started: this.#slots.length,
      ready: this.#slots.filter((s) => s.ready).length,
      jobs: this.#jobs,
      deaths: this.#deaths,
    };
  }
}
