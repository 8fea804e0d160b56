/**
 * Periodic `GET /metrics` of every worker into the load tracker. Each scrape has one
 * deadline (connect, headers and body) and a body cap; a worker's scrapes never overlap;
 * failures are counted per worker and recorded in the tracker, which turns a long enough
 * run of them into staleness. A scrape nothing answered (refused, reset, deadline) marks
 * the worker unreachable at once and is retried within 250 ms. The ranks of one engine
 * (one metrics URL) share one GET and one parse: each reads its own series.
 * Parsing and the metric-name mapping live in the core (`src/load/engine-metrics.ts`).
 *
 * Long file: one scrape's sequence (the GET shared by an engine's ranks, its deadline,
 * each rank's outcome into the tracker, the quick retry) reads best in one place.
 */

import { engineLoadOf, parseEngineExposition } from "../load/engine-metrics.js";
import { type LoadTracker, validateSnapshot } from "../load/load-tracker.js";
import type { PromParseResult } from "../load/prometheus-text.js";
import type { LoadSnapshot, WorkerKind } from "../load/types.js";
import type { WorkerKey } from "../protocol/worker.js";
import { type LogSink, noopLogger } from "../util/log-sink.js";
import { getText } from "./http-text.js";

/** One worker rank to scrape. */
export interface ScrapeTarget {
  readonly key: WorkerKey;
  /** Full URL of the exposition, e.g. `http://127.0.0.1:8000/metrics`. */
  readonly metricsUrl: string;
  readonly kind: WorkerKind;
  readonly model: string | null;
  readonly dpRank: number;
  readonly blockSize: number;
}

export interface MetricsScraperOptions {
  readonly tracker: LoadTracker;
  readonly intervalMs: number;
  readonly timeoutMs: number;
  /** Clock in ms, the same one the router and tracker use. */
  readonly nowMs: () => number;
  readonly logger?: LogSink;
  /** Largest accepted body; default 16 MiB (`DEFAULT_MAX_BODY_BYTES`). */
  readonly maxBodyBytes?: number;
}

/** Counters of one target. */
export interface ScrapeStats {
  readonly worker: WorkerKey;
  readonly url: string;
  readonly scrapes: number;
  readonly errors: number;
  readonly consecutiveErrors: number;
  readonly lastError: string | null;
  readonly lastDurationMs: number | null;
  /** Non-fatal remarks of the last successful parse (e.g. skipped lines). */
  readonly lastNotes: readonly string[];
}

export type ScrapeOutcome =
  | { readonly ok: true; readonly snapshot: LoadSnapshot }
  | { readonly ok: false; readonly error: string };

type FetchResult =
  | { ok: true; load: Omit<LoadSnapshot, "atMs">; notes: readonly string[] }
  | { ok: false; error: string; unreachable?: boolean };

/** One GET of a metrics URL, parsed, or why it failed (shared by the ranks it serves). */
type ExpositionResult =
  | { ok: true; parsed: PromParseResult }
  | { ok: false; error: string; unreachable?: boolean };

/** A GET out now: when it started (the snapshots' time) and its outcome. */
interface SharedFetch {
  readonly startedMs: number;
  readonly result: Promise<ExpositionResult>;
}

/** Connection-level failures: nothing answered, so the worker is taken out at once. */
const UNREACHABLE_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ETIMEDOUT",
  "EPIPE",
  "ENOTFOUND",
  "EAI_AGAIN",
  "UND_ERR_SOCKET",
  "UND_ERR_CONNECT_TIMEOUT",
]);

interface TargetState {
  readonly target: ScrapeTarget;
  running: Promise<ScrapeOutcome> | null;
  scrapes: number;
  errors: number;
  consecutiveErrors: number;
  lastError: string | null;
  lastDurationMs: number | null;
  lastNotes: readonly string[];
  /** A quick re-scrape after an unreachable outcome. */
  retry: NodeJS.Timeout | null;
}

/** A vLLM exposition is ~20-200 KB; a body past this is refused, not read further. */
export const DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024;

/** Longest wait before re-scraping a target that did not answer. */
const RETRY_UNREACHABLE_MS = 250;

export class MetricsScraper {
  readonly #opts: MetricsScraperOptions;
  readonly #log: LogSink;
  readonly #targets = new Map<WorkerKey, TargetState>();
  #timer: NodeJS.Timeout | null = null;
  #stop = new AbortController();
  /** Controllers of the requests out now (aborted by their own timer or by stop()). */
  readonly #inProgress = new Set<AbortController>();
  /**
   * The GET out now per metrics URL. The data-parallel ranks of one engine share a URL:
   * one GET each would queue behind the agent's two sockets per origin, and the later
   * ranks of a wide engine then missed the deadline every round (marked unreachable
   * although the engine answered), besides asking the engine N times for the same text.
   */
  readonly #fetches = new Map<string, SharedFetch>();

  constructor(options: MetricsScraperOptions) {
    if (!(options.intervalMs > 0)) throw new RangeError("intervalMs must be > 0");
    if (!(options.timeoutMs > 0)) throw new RangeError("timeoutMs must be > 0");
    this.#opts = options;
    this.#log = options.logger ?? noopLogger;
  }

  get running(): boolean {
    return this.#timer !== null;
  }

  /** Add (or replace) a target; its staleness clock starts now. Scraped at once if running. */
  add(target: ScrapeTarget): void {
    new URL(target.metricsUrl); // throws a TypeError naming the URL when invalid
    this.#targets.set(target.key, {
      target,
      running: null,
      scrapes: 0,
      errors: 0,
      consecutiveErrors: 0,
      lastError: null,
      lastDurationMs: null,
      lastNotes: [],
      retry: null,
    });
    this.#opts.tracker.track(target.key, this.#opts.nowMs());
    if (this.running) void this.scrapeOnce(target.key);
  }

  /** Stop scraping a target (its tracker entry is the caller's to forget). */
  remove(key: WorkerKey): boolean {
    const s = this.#targets.get(key);
    if (s?.retry) clearTimeout(s.retry);
    return this.#targets.delete(key);
  }

  targets(): ScrapeTarget[] {
    return [...this.#targets.values()].map((s) => s.target);
  }

  /** Start periodic scraping (first round immediately). */
  start(): void {
    if (this.#timer !== null) return;
    if (this.#stop.signal.aborted) this.#stop = new AbortController();
    this.#timer = setInterval(() => this.#tick(), this.#opts.intervalMs);
    this.#timer.unref();
    this.#tick();
  }

  /** Stop the timer, abort scrapes in progress and wait for them to settle. */
  async stop(): Promise<void> {
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#timer = null;
    for (const s of this.#targets.values()) {
      if (s.retry !== null) clearTimeout(s.retry);
      s.retry = null;
    }
    this.#stop.abort();
    for (const a of this.#inProgress) a.abort(new Error("scraper stopped"));
    await Promise.allSettled([...this.#targets.values()].map((s) => s.running));
  }

  /** Scrape one target now (joins a scrape already in progress). */
  scrapeOnce(key: WorkerKey): Promise<ScrapeOutcome> {
    const s = this.#targets.get(key);
    if (s === undefined)
      return Promise.resolve({ ok: false, error: `unknown scrape target ${key}` });
    if (s.running !== null) return s.running;
    const p = this.#scrape(s).finally(() => {
      s.running = null;
    });
    s.running = p;
    return p;
  }

  /** Scrape every target once, concurrently. */
  async scrapeAll(): Promise<void> {
    await Promise.all([...this.#targets.keys()].map((k) => this.scrapeOnce(k)));
  }

  stats(): ScrapeStats[] {
    return [...this.#targets.values()].map((s) => ({
      worker: s.target.key,
      url: s.target.metricsUrl,
      scrapes: s.scrapes,
      errors: s.errors,
      consecutiveErrors: s.consecutiveErrors,
      lastError: s.lastError,
      lastDurationMs: s.lastDurationMs,
      lastNotes: s.lastNotes,
    }));
  }

  #tick(): void {
    const due: WorkerKey[] = [];
    for (const [key, s] of this.#targets) if (s.running === null) due.push(key);
    // Hundreds of scrapes started at once stall the event loop and time out together
    // (docs/scaling.md): past 100 targets, spread each round over half the interval.
    const slices = Math.min(10, Math.ceil(due.length / 100));
    for (let i = 0; i < slices; i++) {
      const part = due.slice((i * due.length) / slices, ((i + 1) * due.length) / slices);
      const run = () => {
        if (this.#timer !== null) for (const key of part) void this.scrapeOnce(key);
      };
      if (i === 0) run();
      else setTimeout(run, (i * this.#opts.intervalMs) / (2 * slices)).unref();
    }
  }

  async #scrape(s: TargetState): Promise<ScrapeOutcome> {
    const { tracker, nowMs } = this.#opts;
    const t = s.target;
    // Joining another rank's GET: the exposition is as of that GET's start. Not one that
    // began before this rank was marked unreachable: it could not clear the mark, and the
    // scrape a mark starts (docs/load.md, "Liveness") is meant to bring the rank back.
    const shared = this.#sharedFetch(t.metricsUrl, tracker.latestUnreachableMs(t.key));
    const startedMs = shared.startedMs;
    const exposition = await shared.result;
    const endMs = nowMs();
    const fetched = this.#loadOf(exposition, t);
    // The snapshot is dated at the scrape's start: the engine may already have counted
    // a request routed after that (see docs/load.md on the combining rule).
    let outcome: ScrapeOutcome = fetched.ok
      ? { ok: true, snapshot: { ...fetched.load, atMs: startedMs } }
      : { ok: false, error: fetched.error };
    const invalid = outcome.ok ? validateSnapshot(outcome.snapshot) : null;
    if (invalid !== null) outcome = { ok: false, error: `invalid load: ${invalid}` };
    // The target may have been removed or replaced while the request was out.
    if (this.#targets.get(t.key) !== s) return outcome;
    s.scrapes++;
    s.lastDurationMs = endMs - startedMs;
    if (outcome.ok) {
      tracker.update(t.key, outcome.snapshot, endMs, "scrape");
      if (s.consecutiveErrors > 0) {
        this.#log.info({ worker: t.key, url: t.metricsUrl }, "metrics scrape recovered");
      }
      s.consecutiveErrors = 0;
      s.lastNotes = fetched.ok ? fetched.notes : [];
      return outcome;
    }
    tracker.recordFailure(t.key, outcome.error, endMs);
    if (!fetched.ok && fetched.unreachable === true) {
      // Nothing answered: out of the candidates now, and asked again soon so that it is
      // back as soon as it answers (not only at the next interval).
      tracker.markUnreachable(t.key, "scrape", outcome.error, endMs);
      this.#retrySoon(s);
    }
    s.errors++;
    s.consecutiveErrors++;
    s.lastError = outcome.error;
    // Log the first failure of a run; the rest are counted, not logged. A scrape cut
    // short by stop() is no failure of the worker's.
    if (s.consecutiveErrors === 1 && !this.#stop.signal.aborted) {
      this.#log.warn(
        { worker: t.key, url: t.metricsUrl, error: outcome.error },
        "metrics scrape failed",
      );
    }
    return outcome;
  }

  /** One extra scrape of an unreachable target after `min(interval, 250 ms)`. */
  #retrySoon(s: TargetState): void {
    if (this.#timer === null || s.retry !== null) return;
    s.retry = setTimeout(
      () => {
        s.retry = null;
        if (this.#timer !== null && this.#targets.get(s.target.key) === s) {
          void this.scrapeOnce(s.target.key);
        }
      },
      Math.min(this.#opts.intervalMs, RETRY_UNREACHABLE_MS),
    );
    s.retry.unref();
  }

  /**
   * The GET of `url` out now if it began at or after `notBeforeMs` (null: any), else a
   * new one (forgotten when it settles).
   */
  #sharedFetch(url: string, notBeforeMs: number | null): SharedFetch {
    const out = this.#fetches.get(url);
    if (out !== undefined && (notBeforeMs === null || out.startedMs >= notBeforeMs)) return out;
    const startedMs = this.#opts.nowMs();
    const result = this.#fetchExposition(url, this.#opts.timeoutMs);
    const f: SharedFetch = { startedMs, result };
    this.#fetches.set(url, f);
    void result.finally(() => {
      if (this.#fetches.get(url) === f) this.#fetches.delete(url);
    });
    return f;
  }

  /** One target's load from a (shared) exposition. */
  #loadOf(e: ExpositionResult, t: ScrapeTarget): FetchResult {
    if (!e.ok) return e;
    const r = engineLoadOf(e.parsed, t);
    return r.ok ? { ok: true, load: r.load, notes: r.notes } : r;
  }

  async #fetchExposition(url: string, timeoutMs: number): Promise<ExpositionResult> {
    // One controller per scrape, aborted by a timer this scraper owns or by stop(). Not
    // `AbortSignal.any([AbortSignal.timeout(…), stop])`: on Node 20.20.2 that combined
    // signal never fired in 20 of 20 hanging fetches while garbage collection ran (the
    // timeout signal is only weakly held); a plain timer fired 20 of 20
    // (bench/scrape-deadline-gc.ts). The one deadline covers connect, headers and body.
    if (this.#stop.signal.aborted) return { ok: false, error: "scraper stopped" };
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(new DeadlineError(timeoutMs)), timeoutMs);
    this.#inProgress.add(abort);
    let text: string;
    try {
      const max = this.#opts.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
      const res = await getText(url, abort.signal, max);
      if (!res.ok) {
        return "status" in res
          ? { ok: false, error: `HTTP ${res.status} from ${url}` }
          : { ok: false, error: `body exceeds ${max} bytes` };
      }
      text = res.text;
    } catch (err) {
      const reason = abort.signal.aborted ? abort.signal.reason : undefined;
      if (reason instanceof DeadlineError) {
        return { ok: false, error: reason.message, unreachable: true };
      }
      const code = (err as { cause?: { code?: unknown } } | null)?.cause?.code;
      return {
        ok: false,
        error: describeFetchError(err, this.#stop.signal.aborted),
        unreachable: typeof code === "string" && UNREACHABLE_CODES.has(code),
      };
    } finally {
      clearTimeout(timer);
      this.#inProgress.delete(abort);
    }
    return { ok: true, parsed: parseEngineExposition(text) };
  }
}

/** The scrape's own deadline passed (connect, headers and body together). */
class DeadlineError extends Error {
  constructor(timeoutMs: number) {
    super(`timeout after ${timeoutMs} ms`);
    this.name = "DeadlineError";
  }
}

function describeFetchError(err: unknown, stopped: boolean): string {
  if (err instanceof Error) {
    if (err.name === "AbortError") return stopped ? "scraper stopped" : "aborted";
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    if (cause?.code !== undefined) return `${cause.code}: ${cause.message ?? err.message}`;
    return err.message;
  }
  return String(err);
}
