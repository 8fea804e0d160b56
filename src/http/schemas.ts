/**
 * JSON schemas of every route's input, built from the configured limits. Fastify
 * compiles them once; a request that fails one never reaches a handler, and the error
 * handler turns the failure into a 400 that names the field and the bad value.
 */

import type { ServerConfig } from "../config/types.js";
import type { ForwardPassMetricsFields } from "../load/forward-pass-metrics.js";
import { MAX_WEIGHT } from "../scheduler/config.js";

/** Limits the schemas depend on. */
export type SchemaLimits = Pick<ServerConfig, "maxPromptTokens" | "maxTokenId">;

const nonNegative = { type: "number", minimum: 0 } as const;
/** Longest request id, in characters, for `/v1/route` and the lifecycle routes alike. */
export const MAX_REQUEST_ID_LENGTH = 256;
const requestId = { type: "string", minLength: 1, maxLength: MAX_REQUEST_ID_LENGTH } as const;
/** Model and adapter names: bounded, since callers choose them freely. */
const name = { type: "string", minLength: 1, maxLength: 256 } as const;

/** A load weight or temperature: bounded so that every cost stays finite (`MAX_WEIGHT`). */
const weight = { type: "number", minimum: 0, maximum: MAX_WEIGHT } as const;
/** A tier weight: a fraction of a miss. */
const fraction = { type: "number", minimum: 0, maximum: 1 } as const;

/** Per-request scheduler overrides: the scheduler's own ranges, as a 400 naming the field. */
const overrides = {
  type: "object",
  additionalProperties: false,
  properties: {
    prefill: weight,
    pending: weight,
    decode: weight,
    queue: weight,
    host: fraction,
    disk: fraction,
    store: fraction,
    temperature: weight,
  },
} as const;

function tokenIds(limits: SchemaLimits) {
  return {
    type: "array",
    // An empty prompt is a caller's bug (engines reject it too): 400, not a load-only pick.
    minItems: 1,
    maxItems: limits.maxPromptTokens,
    items: { type: "integer", minimum: 0, maximum: limits.maxTokenId },
  } as const;
}

export interface MatchBody {
  readonly model?: string;
  readonly token_ids: number[];
  readonly lora_name?: string | null;
  readonly cache_salt?: string | null;
}

export interface RouteBody extends MatchBody {
  readonly request_id?: string;
  readonly overrides?: {
    readonly prefill?: number;
    readonly pending?: number;
    readonly decode?: number;
    readonly queue?: number;
    readonly host?: number;
    readonly disk?: number;
    readonly store?: number;
    readonly temperature?: number;
  };
}

export function matchBodySchema(limits: SchemaLimits) {
  return {
    type: "object",
    required: ["token_ids"],
    additionalProperties: false,
    properties: {
      model: name,
      token_ids: tokenIds(limits),
      lora_name: { ...name, type: ["string", "null"] },
      cache_salt: { type: ["string", "null"], maxLength: 1024 },
    },
  } as const;
}

export function routeBodySchema(limits: SchemaLimits) {
  const match = matchBodySchema(limits);
  return {
    ...match,
    properties: { ...match.properties, request_id: requestId, overrides },
  } as const;
}

export const requestIdParams = {
  type: "object",
  required: ["id"],
  properties: { id: requestId },
} as const;

export const workerIdParams = {
  type: "object",
  required: ["id"],
  properties: { id: { type: "string", minLength: 1, maxLength: 64 } },
} as const;

/** `POST /v1/workers`: shapes only; the rules are `validateWorker`'s (same as the config). */
export const addWorkerBodySchema = {
  type: "object",
  required: ["id", "url"],
  additionalProperties: false,
  properties: {
    id: { type: "string" },
    url: { type: "string" },
    events_endpoint: { type: ["string", "null"] },
    replay_endpoint: { type: ["string", "null"] },
    topic: { type: "string" },
    dp_size: { type: "integer" },
    metrics_url: { type: ["string", "null"] },
    kind: { type: "string" },
    model: { type: ["string", "null"] },
    block_size: { type: "integer" },
  },
} as const;

export interface AddWorkerBody {
  readonly [key: string]: unknown;
}

/** Dynamo's `ForwardPassMetrics` halves (`src/load/forward-pass-metrics.ts`). */
const fpmWorker = {
  data_parallel_rank: { type: ["integer", "null"], minimum: 0 },
  request_active_slots: nonNegative,
  request_total_slots: nonNegative,
  num_requests_waiting: nonNegative,
} as const;
const fpmKv = {
  kv_active_blocks: { type: "integer", minimum: 0 },
  kv_total_blocks: { type: "integer", minimum: 0 },
  gpu_cache_usage_perc: { type: "number", minimum: 0, maximum: 1 },
  gpu_prefix_cache_hit_rate: { type: "number", minimum: 0, maximum: 1 },
} as const;

/**
 * `PUT /v1/workers/:id/load`: what engines without /metrics push. Two shapes: ours
 * (`running`, `waiting`, `kv_usage` required, checked by the route) or Dynamo's
 * `ForwardPassMetrics`, flat or nested (`worker_stats`, `kv_stats`).
 */
export const pushLoadBodySchema = {
  type: "object",
  additionalProperties: false,
  properties: {
    dp_rank: { type: "integer", minimum: 0 },
    running: nonNegative,
    waiting: nonNegative,
    kv_usage: { type: "number", minimum: 0, maximum: 1 },
    num_gpu_blocks: { type: "integer", minimum: 1 },
    prefix_cache_queries: nonNegative,
    prefix_cache_hits: nonNegative,
    ...fpmWorker,
    ...fpmKv,
    worker_stats: { type: "object", additionalProperties: false, properties: fpmWorker },
    kv_stats: { type: "object", additionalProperties: false, properties: fpmKv },
    spec_decode_stats: { type: "null" },
  },
} as const;

export interface PushLoadBody extends ForwardPassMetricsFields {
  readonly dp_rank?: number;
  readonly running?: number;
  readonly waiting?: number;
  readonly kv_usage?: number;
  readonly num_gpu_blocks?: number;
  readonly prefix_cache_queries?: number;
  readonly prefix_cache_hits?: number;
  readonly worker_stats?: ForwardPassMetricsFields;
  readonly kv_stats?: ForwardPassMetricsFields;
  readonly spec_decode_stats?: null;
}
