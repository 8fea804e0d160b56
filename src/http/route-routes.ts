/**
 * `POST /v1/route` (choose a worker, record the request in flight) and `POST /v1/match`
 * (overlap per worker, no side effects). The handlers stay thin: fastify has already
 * parsed and validated the body, the router does the work, this file only translates
 * names and errors. JSON parsing of the token array is the floor of the latency.
 */

import type { FastifyInstance } from "fastify";
import type { MatchReport, RouteDecision, RouteErrorCode } from "../router.js";
import type { CandidateBreakdown } from "../scheduler/types.js";
import type { RouterMetrics } from "../telemetry/metrics.js";
import type { AppDeps } from "./deps.js";
import { ApiError, type ErrorCode } from "./errors.js";
import { type MatchBody, matchBodySchema, type RouteBody, routeBodySchema } from "./schemas.js";

const ROUTE_ERRORS: Record<RouteErrorCode, ErrorCode> = {
  no_workers: "no_worker_available",
  no_workers_for_model: "no_worker_available",
  duplicate_request_id: "duplicate_request",
  invalid_overrides: "invalid_request",
};

function candidateJson(c: CandidateBreakdown) {
  return {
    worker: c.worker,
    overlap_blocks: {
      gpu: c.overlap.gpu,
      host: c.overlap.host,
      disk: c.overlap.disk,
      store: c.overlap.store,
    },
    new_prefill_blocks: c.newPrefillBlocks,
    cost: {
      prefill: c.prefillCost,
      decode: c.decodeCost,
      queue: c.queueCost,
      stale_penalty: c.stalePenalty,
      total: c.totalCost,
    },
    load: {
      pending_prefill_tokens: c.load.pendingPrefillTokens,
      active_blocks: c.load.activeBlocks,
      waiting: c.load.waiting,
      running: c.load.running,
      kv_load: c.load.kvLoad,
      capacity_blocks: c.load.capacityBlocks,
      basis: c.load.basis,
    },
    stale: c.stale,
    excluded: c.excluded,
    probability: c.probability,
  };
}

/** The public JSON of a decision (snake_case, documented in docs/http-api.md). */
export function decisionJson(d: RouteDecision) {
  return {
    request_id: d.requestId,
    worker: { id: d.workerId, rank: d.dpRank, key: d.worker, url: d.url, model: d.model },
    reason: d.reason,
    overlap_blocks: d.overlapBlocks,
    cached_tokens: d.cachedTokens,
    prompt_tokens: d.promptTokens,
    prompt_blocks: d.promptBlocks,
    block_size: d.blockSize,
    prefill_tokens: d.prefillTokens,
    temperature: d.temperature,
    fallbacks: {
      all_stale: d.fallbacks.allStale,
      kv_exclusion_skipped: d.fallbacks.kvExclusionSkipped,
    },
    kv_mean: d.kvMean,
    kv_std: d.kvStd,
    candidates: d.candidates.map(candidateJson),
    timings_ms: {
      hashing: d.timings.hashMs,
      matching: d.timings.matchMs,
      scoring: d.timings.scoreMs,
    },
  };
}

export function matchJson(m: MatchReport) {
  return {
    prompt_tokens: m.promptTokens,
    prompt_blocks: m.promptBlocks,
    block_size: m.blockSize,
    store_blocks: m.store,
    workers: m.workers.map((w) => ({
      worker: w.worker,
      id: w.workerId,
      rank: w.dpRank,
      model: w.model,
      overlap_blocks: { gpu: w.gpu, host: w.host, disk: w.disk, store: w.store },
      cached_tokens: w.cachedTokens,
    })),
  };
}

export function registerRouteRoutes(
  app: FastifyInstance,
  deps: AppDeps,
  metrics: RouterMetrics,
): void {
  const limits = deps.config.server;
  const { router } = deps;

  app.post<{ Body: RouteBody }>(
    "/v1/route",
    { schema: { body: routeBodySchema(limits) } },
    async (req) => {
      const b = req.body;
      const result = router.route(
        {
          tokenIds: b.token_ids,
          loraName: b.lora_name ?? null,
          requestId: b.request_id,
          model: b.model,
          overrides: b.overrides,
        },
        deps.nowMs(),
      );
      if (!result.ok) {
        const code = ROUTE_ERRORS[result.error.code];
        metrics.recordFailure(code);
        throw new ApiError(code, result.error.message, { reason: result.error.code });
      }
      const d = result.decision;
      const t = d.timings;
      const ratio = d.promptBlocks === 0 ? 0 : bestOverlap(d) / d.promptBlocks;
      metrics.recordDecision(d.worker, d.reason, ratio, {
        hashingMs: t.hashMs,
        matchingMs: t.matchMs,
        scoringMs: t.scoreMs,
        totalMs: t.hashMs + t.matchMs + t.scoreMs,
      });
      return decisionJson(d);
    },
  );

  app.post<{ Body: MatchBody }>(
    "/v1/match",
    { schema: { body: matchBodySchema(limits) } },
    async (req) => {
      const b = req.body;
      return matchJson(
        router.match({ tokenIds: b.token_ids, loraName: b.lora_name ?? null, model: b.model }),
      );
    },
  );
}

/** Blocks of the prompt the chosen worker holds in any tier (or a store offers). */
function bestOverlap(d: RouteDecision): number {
  const c = d.candidates.find((x) => x.worker === d.worker);
  return c === undefined ? d.overlapBlocks : Math.max(c.overlap.disk, c.overlap.store);
}
