/**
 * The shape of kvrouter's configuration once validated. Everything here is read-only:
 * `loadConfig` freezes the object it returns, and nothing re-reads env or argv later.
 */

import type { SchedulerConfig } from "../scheduler/types.js";

/** Which engine speaks on a worker's event stream and /metrics. */
export type EngineKind = "vllm" | "sglang" | "mooncake-store";

export const ENGINE_KINDS: readonly EngineKind[] = ["vllm", "sglang", "mooncake-store"];

export type LogLevel = "fatal" | "error" | "warn" | "info" | "debug" | "trace" | "silent";

export const LOG_LEVELS: readonly LogLevel[] = [
  "fatal",
  "error",
  "warn",
  "info",
  "debug",
  "trace",
  "silent",
];

/** One statically declared (or API-added) engine. Ranks r > 0 use endpoint port + r. */
export interface WorkerConfig {
  /** Unique id, used in metrics labels and worker keys (`<id>#<rank>`). */
  readonly id: string;
  /** HTTP base URL of the engine's API (where the caller sends the request). */
  readonly url: string;
  /** ZeroMQ PUB endpoint of rank 0 (`tcp://host:port`); null = no cache events. */
  readonly eventsEndpoint: string | null;
  /** ZeroMQ ROUTER replay endpoint of rank 0; null = no replay (gaps reset the worker). */
  readonly replayEndpoint: string | null;
  /** Topic the engine publishes on (vLLM's default is the empty string). */
  readonly topic: string;
  /** Data-parallel size: number of independent caches and publishers. */
  readonly dpSize: number;
  /** Prometheus endpoint for load; null = load is pushed with PUT /v1/workers/:id/load. */
  readonly metricsUrl: string | null;
  readonly kind: EngineKind;
  /** Served model name; requests naming another model never go to this worker. */
  readonly model: string | null;
  /** Tokens per KV block on this engine; must equal the index's block size. */
  readonly blockSize: number;
  /** GPU KV blocks per rank; null = as the engine reports (`vllm:cache_config_info`). */
  readonly numGpuBlocks?: number | null;
}

export interface ServerConfig {
  readonly host: string;
  readonly port: number;
  /** Largest accepted request body, in bytes (413 above). */
  readonly bodyLimitBytes: number;
  /** When set, mutating worker routes need `Authorization: Bearer <token>`. */
  readonly authToken: string | null;
  /** Listen on a non-loopback address without `authToken` (refused at start-up otherwise). */
  readonly allowUnauthenticated: boolean;
  /** When set, `/v1/route`, `/v1/match` and the lifecycle reports need this bearer token. */
  readonly decisionToken: string | null;
  /** Longest time to receive a whole request (0 = none). */
  readonly requestTimeoutMs: number;
  /** Longest time to receive a request's headers. */
  readonly headersTimeoutMs: number;
  /** Idle keep-alive connections are closed after this long. */
  readonly keepAliveTimeoutMs: number;
  /** Open connections accepted at once. */
  readonly maxConnections: number;
  /** On shutdown, how long open connections get 503 + `Connection: close` before closing. */
  readonly drainMs: number;
  /** Deepest JSON nesting on routes that set no depth of their own. */
  readonly maxJsonDepth: number;
  /** Longest accepted prompt, in tokens. */
  readonly maxPromptTokens: number;
  /** Largest accepted token id (vocabularies stay well below this). */
  readonly maxTokenId: number;
  /** `/v1/route` when every candidate's load is stale: answer anyway, or 503. */
  readonly onAllStale: OnAllStale;
  /** Most candidates a decision's breakdown lists (the lowest-cost ones and the chosen one). */
  readonly routeCandidates: number;
}

export const ON_ALL_STALE = ["route", "reject"] as const;
export type OnAllStale = (typeof ON_ALL_STALE)[number];

export interface IndexConfig {
  /** Tokens per block for the router's own block keys. */
  readonly blockSize: number;
  /** Most (worker, block) entries kept; the least recently stored go first. 0 = no cap. */
  readonly maxBlocks: number;
}

export interface LoadConfig {
  readonly scrapeIntervalMs: number;
  readonly scrapeTimeoutMs: number;
  /** A load snapshot older than this is stale: the worker is not ready for /readyz. */
  readonly staleAfterMs: number;
}

/** Predict-on-route and the degraded-mode fallback (docs/prediction.md). */
export interface PredictConfig {
  readonly ttlMs: number;
  readonly maxBlocksPerWorker: number;
  readonly fallback: boolean;
  readonly degradedTtlMs: number;
  readonly silentAfterMs: number;
  readonly recoverAfterMs: number;
}

export interface InFlightConfig {
  /** A routed request with no `first-token` after this long no longer counts as prefill. */
  readonly prefillTtlMs: number;
  /** A routed request with no `done` after this long is forgotten. */
  readonly ttlMs: number;
  /** Most in-flight records per worker (oldest dropped past it). */
  readonly maxPerWorker: number;
  /** The workers' prefill rate, uncached tokens/s (0: unknown; `Router` deps). */
  readonly prefillTokensPerSec: number;
  /** The per-request part of a worker's prefill, ms. */
  readonly prefillOverheadMs: number;
}

export interface EventsConfig {
  /** Longest silence from a replay endpoint before that attempt stops (and is resumed). */
  readonly replayTimeoutMs: number;
  /** Replays in a row that bring nothing new before the worker is cleared. */
  readonly replayMaxAttempts: number;
  /** Back-off before the n-th retry: replayBackoffMs × 2^(n−1), at most replayBackoffMaxMs. */
  readonly replayBackoffMs: number;
  readonly replayBackoffMaxMs: number;
  /** Replay requests running at once across every engine. */
  readonly maxConcurrentReplays: number;
}

/** Active-active replicas sharing predicted load through Redis (`docs/replicas.md`). */
export interface ReplicasConfig {
  /** null = off (one router, or replicas that do not share load). */
  readonly redisUrl: string | null;
  /** null = `<hostname>-<pid>`. */
  readonly id: string | null;
  readonly keyPrefix: string;
  readonly heartbeatMs: number;
  readonly staleAfterMs: number;
  readonly commandTimeoutMs: number;
  readonly maxPendingFlushes: number;
  /** Send pending requests' prompt block keys (docs/replicas.md). */
  readonly shareKeys: boolean;
}

/** Warm restart from the router's own snapshot (docs/index.md, "Warm restart"). */
export interface SnapshotConfig {
  /** null = off. */
  readonly path: string | null;
  readonly intervalMs: number;
  /** Base URL of a peer kvrouter to fetch `GET /v1/snapshot` from at start; null = off. */
  readonly fromPeer: string | null;
  readonly fromPeerTimeoutMs: number;
}

/** The OpenAI-compatible endpoint (`src/gateway/`); fields documented in `gateway-fields.ts`. */
export interface GatewayConfig {
  readonly enabled: boolean;
  readonly authToken: string | null;
  readonly workerApiKey: string | null;
  readonly connectTimeoutMs: number;
  readonly firstByteTimeoutMs: number;
  readonly idleTimeoutMs: number;
  readonly maxAttempts: number;
  readonly retryBackoffMs: number;
  readonly breakerFailures: number;
  readonly breakerHalfOpenAfterMs: number;
  readonly busyWaiting: number;
  readonly busyKvUsage: number;
  readonly busyPrefillTokens: number;
  readonly queueSize: number;
  readonly queueTimeoutMs: number;
  /** `gateway.tokenizers` as given; parsed by `parseTokenizerSpecs`. */
  readonly tokenizers: string | null;
  readonly tokenizerThreads: number;
  readonly tokenizeTimeoutMs: number;
  readonly streamUsage: boolean;
  readonly predictionWarnRatio: number;
  readonly predictionWarnIntervalMs: number;
}

export interface LogConfig {
  readonly level: LogLevel;
}

export interface KvrouterConfig {
  readonly server: ServerConfig;
  readonly index: IndexConfig;
  /** Resolved by the scheduler's own rules (`resolveSchedulerConfig`), defaults there. */
  readonly scheduler: SchedulerConfig;
  readonly load: LoadConfig;
  readonly inFlight: InFlightConfig;
  readonly predict: PredictConfig;
  readonly events: EventsConfig;
  readonly replicas: ReplicasConfig;
  readonly gateway: GatewayConfig;
  readonly snapshot: SnapshotConfig;
  readonly log: LogConfig;
  readonly workers: readonly WorkerConfig[];
}
