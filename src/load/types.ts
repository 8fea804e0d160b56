/**
 * Load contracts: what the router knows about each worker's current load, from the
 * engine's own metrics (scraped or pushed) and from its own routing decisions
 * (in-flight bookkeeping). Pure data; the classes live beside this file.
 */

import type { WorkerKey } from "../protocol/worker.js";

/** Engine families the router knows; a Mooncake store is a cache holder, never a target. */
export type WorkerKind = "vllm" | "sglang" | "mooncake-store";

/** What is needed to register a worker (one data-parallel rank of an engine). */
export interface WorkerSpec {
  readonly workerId: string;
  /** Data-parallel rank; default 0. */
  readonly dpRank?: number;
  /** Base URL requests are sent to, e.g. `http://127.0.0.1:8000`. */
  readonly url: string;
  /** Full URL of the Prometheus endpoint; default `<url>/metrics`; null = no scraping (push). */
  readonly metricsUrl?: string | null;
  /** Served model name; null = serves whatever is asked (no model filtering). */
  readonly model?: string | null;
  readonly kind: WorkerKind;
  /** Tokens per KV block (engine's block size / page size). */
  readonly blockSize: number;
  /** GPU KV capacity in blocks when known from config (a scrape can also report it). */
  readonly numGpuBlocks?: number | null;
}

/** A registered worker, normalised. */
export interface WorkerInfo {
  readonly key: WorkerKey;
  readonly workerId: string;
  readonly dpRank: number;
  readonly url: string;
  readonly metricsUrl: string | null;
  readonly model: string | null;
  readonly kind: WorkerKind;
  readonly blockSize: number;
  readonly numGpuBlocks: number | null;
}

/** An engine's load as it reports it (`engine-metrics.ts`), without the time of reading. */
export interface EngineLoad {
  /** Requests being executed (prefill or decode). */
  readonly running: number;
  /** Requests queued, not yet scheduled. */
  readonly waiting: number;
  /** Fraction of GPU KV blocks in use, 0..1. */
  readonly kvUsage: number;
  /** Prefix-cache lookups in tokens (monotonic counter), when exposed. */
  readonly prefixCacheQueries?: number;
  /** Prefix-cache hits in tokens (monotonic counter), when exposed. */
  readonly prefixCacheHits?: number;
  /** Engine-computed hit rate 0..1 (SGLang exposes a rate, not counters). */
  readonly prefixCacheHitRate?: number;
  /** GPU KV capacity in blocks, when exposed (`vllm:cache_config_info`). */
  readonly numGpuBlocks?: number;
  /** Engine block size in tokens, when exposed. */
  readonly blockSize?: number;
}

/** One observation of an engine's load, scraped from /metrics or pushed. */
export interface LoadSnapshot extends EngineLoad {
  /** Router clock (ms) at which the engine was in this state (the scrape's start). */
  readonly atMs: number;
}

/** Where a worker's latest snapshot came from. */
export type LoadSource = "scrape" | "push";

/**
 * Freshness of a worker's load information:
 * - `fresh`: a successful scrape/push within `staleAfterMs`;
 * - `stale`: no success for `staleAfterMs`, or never a success and at least one failure, or
 *   marked unreachable (disconnected event stream, refused connection) since the last success;
 * - `pending`: tracked for less than `staleAfterMs`, no scrape/push has answered yet (just
 *   added): routed on in-flight predictions alone, like `unknown`;
 * - `unknown`: the tracker never heard of the worker (no scraping configured, e.g. replay).
 */
export type LoadState = "fresh" | "stale" | "pending" | "unknown";

/** Everything the tracker knows about one worker, at a given time. */
export interface LoadView {
  readonly worker: WorkerKey;
  readonly state: LoadState;
  readonly stale: boolean;
  /** Latest successful snapshot (kept even when stale, for display). */
  readonly snapshot: LoadSnapshot | null;
  readonly source: LoadSource | null;
  readonly lastSuccessMs: number | null;
  readonly lastFailureMs: number | null;
  readonly lastError: string | null;
  /** Failures since the last success. */
  readonly consecutiveFailures: number;
  readonly totalFailures: number;
  readonly totalSuccesses: number;
  /** Why the worker is out of the candidates at once (see `LoadTracker.markUnreachable`). */
  readonly unreachable: string | null;
  readonly unreachableSinceMs: number | null;
  /** Transitions to unreachable since tracking began. */
  readonly timesUnreachable: number;
}

/** Per-worker totals of requests routed by this router and not yet finished. */
export interface InFlightTotals {
  /** Uncached prompt tokens of requests that have not produced their first token. */
  readonly pendingPrefillTokens: number;
  /** Requests that have not produced their first token. */
  readonly pendingRequests: number;
  /** KV blocks of requests not yet done. */
  readonly activeBlocks: number;
  /** Requests not yet done. */
  readonly activeRequests: number;
}

/** Result of reporting progress for a request id. */
export type InFlightUpdate =
  | { readonly ok: true; readonly worker: WorkerKey; readonly requestId: string }
  | { readonly ok: false; readonly reason: "unknown_request"; readonly requestId: string };

/** Result of recording a routed request. */
export type InFlightAdd =
  | { readonly ok: true }
  | { readonly ok: false; readonly reason: "duplicate_request"; readonly requestId: string };

/**
 * A worker's load as the scheduler sees it: scraped state combined with the router's
 * own in-flight predictions without double counting (see `effective-load.ts`).
 */
export interface EffectiveLoad {
  /** Uncached prefill tokens still to be computed on this worker (predicted). */
  readonly pendingPrefillTokens: number;
  /** KV blocks held by running/queued requests (scraped usage × capacity + newer in-flight). */
  readonly activeBlocks: number;
  /** Requests waiting to be scheduled (scraped waiting + newer in-flight not started). */
  readonly waiting: number;
  /** Requests running (scraped running + newer in-flight started). */
  readonly running: number;
  /** KV load 0..1 (activeBlocks / capacity, or scraped usage); null when unknowable. */
  readonly kvLoad: number | null;
  /**
   * The engine's own KV figure (scraped or pushed usage, 0..1), the only load the KV
   * exclusion rules use: predictions raise a worker's cost but never exclude it on their
   * own. null without a usable snapshot; absent = same as `kvLoad` (hand-built loads).
   */
  readonly confirmedKvLoad?: number | null;
  /** GPU KV capacity in blocks, when known. */
  readonly capacityBlocks: number | null;
  /** Whether a (non-stale) scrape/push contributed, or only predictions. */
  readonly basis: "scraped+predicted" | "predicted";
}
