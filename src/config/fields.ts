/**
 * Every scalar setting in one table: its path, type, bounds, default and meaning.
 * Defaults live here and nowhere else; the env variable names, the `--set` paths and
 * the validation all derive from this table, so adding a setting is one line.
 */

import { GATEWAY_FIELDS } from "./gateway-fields.js";
import { PREDICT_FIELDS } from "./predict-fields.js";
import { SNAPSHOT_FIELDS } from "./snapshot-fields.js";
import { LOG_LEVELS, ON_ALL_STALE } from "./types.js";

export type FieldSpec =
  | {
      readonly kind: "int";
      readonly min: number;
      readonly max: number;
      readonly default: number;
      readonly doc: string;
    }
  | {
      readonly kind: "number";
      readonly min: number;
      readonly max: number;
      readonly default: number;
      readonly doc: string;
    }
  | { readonly kind: "string"; readonly default: string; readonly doc: string }
  | { readonly kind: "bool"; readonly default: boolean; readonly doc: string }
  | { readonly kind: "optional-string"; readonly default: null; readonly doc: string }
  | {
      readonly kind: "enum";
      readonly values: readonly string[];
      readonly default: string;
      readonly doc: string;
    };

const MiB = 1024 * 1024;
const DAY_MS = 86_400_000;

/** Sections and their fields. `workers` is a list and is validated separately. */
export const FIELDS = {
  server: {
    host: { kind: "string", default: "127.0.0.1", doc: "address to listen on" },
    port: { kind: "int", min: 0, max: 65535, default: 8080, doc: "port to listen on (0 = any)" },
    bodyLimitBytes: {
      kind: "int",
      min: 1024,
      max: 256 * MiB,
      default: 4 * MiB,
      doc: "largest request body in bytes (413 above)",
    },
    authToken: {
      kind: "optional-string",
      default: null,
      doc: "bearer token required by mutating worker routes (unset = open)",
    },
    allowUnauthenticated: {
      kind: "bool",
      default: false,
      doc: "listen on a non-loopback address without authToken (refused otherwise)",
    },
    decisionToken: {
      kind: "optional-string",
      default: null,
      doc: "bearer token required by /v1/route, /v1/match and the lifecycle reports (unset = open)",
    },
    requestTimeoutMs: {
      kind: "int",
      min: 0,
      max: DAY_MS,
      default: 30_000,
      doc: "longest time to receive a whole request, headers and body (0 = none)",
    },
    headersTimeoutMs: {
      kind: "int",
      min: 1,
      max: DAY_MS,
      default: 10_000,
      doc: "longest time to receive a request's headers",
    },
    keepAliveTimeoutMs: {
      kind: "int",
      min: 1,
      max: DAY_MS,
      default: 72_000,
      doc: "an idle keep-alive connection is closed after this long",
    },
    maxConnections: {
      kind: "int",
      min: 1,
      max: 1_000_000,
      default: 8192,
      doc: "open HTTP connections accepted at once (more are closed at accept)",
    },
    drainMs: {
      kind: "int",
      min: 0,
      max: 60_000,
      default: 2000,
      doc: "on SIGTERM, how long requests on open connections get 503 + Connection: close before they are closed",
    },
    maxJsonDepth: {
      kind: "int",
      min: 2,
      max: 1000,
      default: 64,
      doc: "deepest JSON nesting accepted on routes that do not set their own (400 above)",
    },
    maxPromptTokens: {
      kind: "int",
      min: 1,
      max: 10_000_000,
      default: 262_144,
      doc: "longest accepted prompt in tokens",
    },
    maxTokenId: {
      kind: "int",
      min: 1,
      max: 2 ** 31 - 1,
      default: 16_777_215,
      doc: "largest accepted token id",
    },
    onAllStale: {
      kind: "enum",
      values: ON_ALL_STALE,
      default: "route",
      doc: "/v1/route when every candidate's load is stale: route (flagged all_stale) or reject (503)",
    },
    routeCandidates: {
      kind: "int",
      min: 1,
      max: 65536,
      default: 32,
      doc: "most candidates a /v1/route answer explains: past it the lowest-cost ones and the chosen one (all are scored)",
    },
  },
  index: {
    blockSize: {
      kind: "int",
      min: 1,
      max: 65536,
      default: 16,
      doc: "tokens per block (vLLM's default is 16)",
    },
    maxBlocks: {
      kind: "int",
      min: 0,
      max: 2 ** 31 - 1,
      default: 20_000_000,
      doc: "most (worker, block) entries the index keeps (~110 B each); the least recently stored go first; 0 = no cap",
    },
  },
  load: {
    scrapeIntervalMs: {
      kind: "int",
      min: 10,
      max: DAY_MS,
      default: 1000,
      doc: "how often each worker's /metrics is scraped",
    },
    scrapeTimeoutMs: {
      kind: "int",
      min: 1,
      max: DAY_MS,
      default: 500,
      doc: "timeout of one scrape",
    },
    staleAfterMs: {
      kind: "int",
      min: 1,
      max: DAY_MS,
      default: 5000,
      doc: "a load snapshot older than this is stale",
    },
  },
  inFlight: {
    prefillTtlMs: {
      kind: "int",
      min: 1,
      max: DAY_MS,
      default: 60_000,
      doc: "assume a routed request's prefill is done after this long without `first-token`",
    },
    ttlMs: {
      kind: "int",
      min: 1,
      max: DAY_MS,
      default: 600_000,
      doc: "forget a routed request after this long without `done`",
    },
    maxPerWorker: {
      kind: "int",
      min: 1,
      max: 10_000_000,
      default: 8192,
      doc: "most in-flight records per worker; the oldest is dropped (and counted) past it",
    },
    prefillTokensPerSec: {
      kind: "number",
      min: 0,
      max: 1e9,
      default: 0,
      doc: "the workers' prefill rate, uncached tokens/s: queued prefill leaves out what the prefill in progress has computed (0 = unknown, off)",
    },
    prefillOverheadMs: {
      kind: "number",
      min: 0,
      max: DAY_MS,
      default: 0,
      doc: "the per-request part of a worker's prefill, ms (with `prefillTokensPerSec`)",
    },
  },
  predict: PREDICT_FIELDS,
  events: {
    replayTimeoutMs: {
      kind: "int",
      min: 1,
      max: DAY_MS,
      default: 2000,
      doc: "longest silence from an engine's replay endpoint before that attempt stops",
    },
    replayMaxAttempts: {
      kind: "int",
      min: 0,
      max: 1000,
      default: 5,
      doc: "replays in a row that bring nothing new before the worker is cleared",
    },
    replayBackoffMs: {
      kind: "int",
      min: 1,
      max: DAY_MS,
      default: 200,
      doc: "back-off before the n-th retry of a replay: this × 2^(n−1)",
    },
    replayBackoffMaxMs: {
      kind: "int",
      min: 1,
      max: DAY_MS,
      default: 5000,
      doc: "cap of the replay back-off",
    },
    maxConcurrentReplays: {
      kind: "int",
      min: 1,
      max: 10_000,
      default: 4,
      doc: "replay requests running at once across all engines",
    },
  },
  replicas: {
    redisUrl: {
      kind: "optional-string",
      default: null,
      doc: "share predicted load with other replicas through this Redis/Valkey (`redis://host:port`); unset = off",
    },
    id: {
      kind: "optional-string",
      default: null,
      doc: "this replica's id, unique among replicas (unset = `<hostname>-<pid>`)",
    },
    keyPrefix: {
      kind: "string",
      default: "kvrouter",
      doc: "prefix of the Redis keys and channel (replicas sharing load use the same)",
    },
    heartbeatMs: {
      kind: "int",
      min: 10,
      max: 60_000,
      default: 500,
      doc: "heartbeat (and deadline sweep) interval",
    },
    staleAfterMs: {
      kind: "int",
      min: 20,
      max: 600_000,
      default: 3000,
      doc: "a replica silent this long is dropped with its load (its Redis hash expires too)",
    },
    commandTimeoutMs: {
      kind: "int",
      min: 10,
      max: 60_000,
      default: 500,
      doc: "a Redis write slower than this counts as failed (routing never waits for it)",
    },
    maxPendingFlushes: {
      kind: "int",
      min: 1,
      max: 100_000,
      default: 64,
      doc: "Redis writes outstanding at once; above it changes wait and go out as one batch",
    },
    shareKeys: {
      kind: "bool",
      default: true,
      doc: "send each pending request's prompt block keys, so peers weigh a holder's queue by prefix as one router does; false while replicas older than 2026-11-23 still run (they refuse such messages)",
    },
  },
  gateway: GATEWAY_FIELDS,
  snapshot: SNAPSHOT_FIELDS,
  log: {
    level: { kind: "enum", values: LOG_LEVELS, default: "info", doc: "pino log level" },
  },
} as const satisfies Record<string, Record<string, FieldSpec>>;

export type SectionName = keyof typeof FIELDS;

/**
 * Scalar paths inside the `scheduler` section, for env/flag overrides. The scheduler
 * owns their defaults and rules (`src/scheduler/defaults.ts`, `resolveSchedulerConfig`).
 */
export const SCHEDULER_PATHS: Readonly<Record<string, "number" | "enum">> = {
  temperature: "number",
  outlierStdK: "number",
  kvHardCap: "number",
  stalePolicy: "enum",
  stalePenalty: "number",
  "weights.prefill": "number",
  "weights.pending": "number",
  "weights.decode": "number",
  "weights.queue": "number",
  "weights.host": "number",
  "weights.disk": "number",
  "weights.store": "number",
};

/** Every scalar field as `section.key`, in table order. */
export function fieldPaths(): { section: SectionName; key: string; spec: FieldSpec }[] {
  const out: { section: SectionName; key: string; spec: FieldSpec }[] = [];
  for (const section of Object.keys(FIELDS) as SectionName[]) {
    for (const [key, spec] of Object.entries(FIELDS[section])) {
      out.push({ section, key, spec: spec as FieldSpec });
    }
  }
  return out;
}

/** `load.scrapeIntervalMs` → `KVROUTER_LOAD_SCRAPE_INTERVAL_MS`. */
export function envNameOf(section: string, key: string): string {
  const snake = (s: string) => s.replace(/([a-z0-9])([A-Z])/g, "$1_$2").toUpperCase();
  // `key` may already hold underscores (nested scheduler paths): snake() keeps them.
  return `KVROUTER_${snake(section)}_${snake(key)}`;
}
