/**
 * Periodic `GET /metrics` of every worker into the load tracker. Each scrape has a
 * timeout; a worker's scrapes never overlap; failures are counted per worker and
 * recorded in the tracker, which turns a long enough run of them into staleness.
 * Parsing and the metric-name mapping live in the core (`src/load/engine-metrics.ts`).
 */

import { parseEngineMetrics } from "../load/engine-metrics.js";
import { type LoadTracker, validateSnapshot } from "../load/load-tracker.js";
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
  /** Largest accepted body; default 16 MiB. */
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

interface TargetState {
  readonly target: ScrapeTarget;
  running: Promise<ScrapeOutcome> | null;
  scrapes: number;
  errors: number;
  consecutiveErrors: number;
  lastError: string | null;
  lastDurationMs: number | null;
  lastNotes: readonly string[];
}

export class MetricsScraper {
  readonly #opts: MetricsScraperOptions;
  readonly #log: LogSink;
  readonly #targets = new Map<WorkerKey, TargetState>();
  #timer: NodeJS.Timeout | null = null;
  #stop = new AbortController();

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
    });
    this.#opts.tracker.track(target.key, this.#opts.nowMs());
    if (this.running) void this.scrapeOnce(target.key);
  }

  /** Stop scraping a target (its tracker entry is the caller's to forget). */
  remove(key: WorkerKey): boolean {
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
    this.#stop.abort();
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
    const { tracker, nowMs, timeoutMs } = this.#opts;
    const t = s.target;
    const startedMs = nowMs();
    const fetched = await this.#fetchLoad(t, timeoutMs);
    const endMs = nowMs();
    // The snapshot is dated at the scrape's start: the engine may already have counted
    // a request routed after that (see docs/load.md on the combining rule).
    let outcome: ScrapeOutcome = fetched.ok
      ? { ok: true, snapshot: { ...fetched.load, atMs: startedMs } }
      : fetched;
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
    s.errors++;
    s.consecutiveErrors++;
    s.lastError = outcome.error;
    // Log the first failure of a run; the rest are counted, not logged.
    if (s.consecutiveErrors === 1) {
      this.#log.warn(
        { worker: t.key, url: t.metricsUrl, error: outcome.error },
        "metrics scrape failed",
      );
    }
    return outcome;
  }

  async #fetchLoad(
    t: ScrapeTarget,
    timeoutMs: number,
  ): Promise<
    | { ok: true; load: Omit<LoadSnapshot, "atMs">; notes: readonly string[] }
    | { ok: false; error: string }
  > {
    let text: string;
    try {
      const signal = AbortSignal.any([AbortSignal.timeout(timeoutMs), this.#stop.signal]);
      const max = this.#opts.maxBodyBytes ?? 16 * 1024 * 1024;
      const res = await getText(t.metricsUrl, signal, max);
      if (!res.ok) {
        return "status" in res
          ? { ok: false, error: `HTTP ${res.status} from ${t.metricsUrl}` }
          : { ok: false, error: `body of ${res.tooLarge} bytes exceeds ${max}` };
      }
      text = res.text;
    } catch (err) {
      return { ok: false, error: describeFetchError(err, timeoutMs, this.#stop.signal.aborted) };
    }
    const parsed = parseEngineMetrics(text, t);
    return parsed.ok ? { ok: true, load: parsed.load, notes: parsed.notes } : parsed;
  }
}

function describeFetchError(err: unknown, timeoutMs: number, stopped: boolean): string {
  if (err instanceof Error) {
    if (err.name === "TimeoutError") return `timeout after ${timeoutMs} ms`;
    if (err.name === "AbortError") return stopped ? "scraper stopped" : "aborted";
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    if (cause?.code !== undefined) return `${cause.code}: ${cause.message ?? err.message}`;
    return err.message;
  }
  return String(err);
}
