/**
 * `POST /v1/route` (choose a worker, record the request in flight) and `POST /v1/match`
 * (overlap per worker, no side effects). The handlers stay thin: fastify has already
 * parsed and validated the body, the router does the work, this file only translates
 * names and errors. JSON parsing of the token array is the floor of the latency.
 */

import type { FastifyInstance } from "fastify";
import type { RouteDecision, RouteErrorCode } from "../router.js";
import type { RouterMetrics } from "../telemetry/metrics.js";
import { requireBearer } from "./auth.js";
import type { AppDeps } from "./deps.js";
import { ApiError, type ErrorCode } from "./errors.js";
import { writeDecision, writeMatch } from "./route-json.js";
import { type MatchBody, matchBodySchema, type RouteBody, routeBodySchema } from "./schemas.js";

/** A string body with this type is sent as it is (fastify serialises only objects). */
const JSON_TYPE = "application/json; charset=utf-8";

const ROUTE_ERRORS: Record<RouteErrorCode, ErrorCode> = {
  no_workers: "no_worker_available",
  no_workers_for_model: "no_worker_available",
  duplicate_request_id: "duplicate_request",
  invalid_overrides: "invalid_request",
  all_excluded: "no_worker_available",
};

export function registerRouteRoutes(
  app: FastifyInstance,
  deps: AppDeps,
  metrics: RouterMetrics,
): void {
  const limits = deps.config.server;
  const { router } = deps;
  // Checked before the body is read; the body nests 2 levels (token_ids, overrides), 3 so
  // that a chat body (`messages: [{…}]`) sent here by mistake still gets the schema hint.
  const opts = {
    onRequest:
      limits.decisionToken === null
        ? []
        : [requireBearer(limits.decisionToken, "server.decisionToken")],
    config: { maxJsonDepth: 3 },
  };
  const none: ReadonlySet<string> = new Set();
  const catchingUp = deps.catchingUp ?? (() => none);

  app.post<{ Body: RouteBody }>(
    "/v1/route",
    { ...opts, schema: { body: routeBodySchema(limits) } },
    async (req, reply) => {
      const b = req.body;
      const result = router.route(
        {
          tokenIds: b.token_ids,
          loraName: b.lora_name ?? null,
          cacheSalt: b.cache_salt ?? null,
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
      if (d.fallbacks.allStale && limits.onAllStale === "reject") {
        // Nothing is known to be alive: the caller is better told than sent to a corpse.
        // The decision is undone whole: its predict-on-route blocks first (read from the
        // in-flight record), or the worker keeps a prefix it was never sent, as GPU-held.
        router.withdrawPrediction(d.requestId);
        deps.inFlight.done(d.requestId, deps.nowMs());
        metrics.recordFailure("no_fresh_worker");
        throw new ApiError(
          "no_fresh_worker",
          `no candidate has fresh load (every one stale for load.staleAfterMs, ${deps.config.load.staleAfterMs} ms); server.onAllStale is reject`,
          { reason: "all_stale", candidates: d.candidates.map((c) => c.worker) },
        );
      }
      const t = d.timings;
      const ratio = d.promptBlocks === 0 ? 0 : bestOverlap(d) / d.promptBlocks;
      metrics.recordDecision(d.worker, d.reason, ratio, {
        hashingMs: t.hashMs,
        matchingMs: t.matchMs,
        scoringMs: t.scoreMs,
        totalMs: t.hashMs + t.matchMs + t.scoreMs,
      });
      return reply.header("content-type", JSON_TYPE).send(writeDecision(d, catchingUp()));
    },
  );

  app.post<{ Body: MatchBody }>(
    "/v1/match",
    { ...opts, schema: { body: matchBodySchema(limits) } },
    async (req, reply) => {
      const b = req.body;
      const report = router.match({
        tokenIds: b.token_ids,
        loraName: b.lora_name ?? null,
        cacheSalt: b.cache_salt ?? null,
        model: b.model,
      });
      return reply.header("content-type", JSON_TYPE).send(writeMatch(report, catchingUp()));
    },
  );
}

/** Blocks of the prompt the chosen worker holds in any tier (or a store offers). */
function bestOverlap(d: RouteDecision): number {
  const c = d.candidates.find((x) => x.worker === d.worker);
  return c === undefined ? d.overlapBlocks : Math.max(c.overlap.disk, c.overlap.store);
}
