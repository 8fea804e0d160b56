/**
 * In-flight lifecycle: the caller reports when a routed request produced its first token
 * (its prefill no longer loads the worker), when it finished, or that the worker never
 * took it (`failed`: done, and predict-on-route's blocks for it taken back). Unknown ids
 * are a 404: never routed, already done, or expired by `inFlight.ttlMs`.
 */

import type { FastifyInstance, FastifyRequest } from "fastify";
import type { InFlightUpdate } from "../load/types.js";
import { requireBearer } from "./auth.js";
import type { AppDeps } from "./deps.js";
import { ApiError } from "./errors.js";
import { requestIdParams } from "./schemas.js";

function answer(update: InFlightUpdate, event: string) {
  if (!update.ok) {
    throw new ApiError(
      "request_not_found",
      `no in-flight request ${JSON.stringify(update.requestId)} (never routed, already done, or expired)`,
    );
  }
  return { request_id: update.requestId, worker: update.worker, event };
}

/**
 * The reports need no body, but `curl -X POST -H 'content-type: application/json'` sends
 * the header with an empty one, which the JSON parser refuses. An empty body is dropped
 * here, before parsing, with its content type, so it reads as "no body".
 */
async function allowEmptyBody(req: FastifyRequest): Promise<void> {
  const h = req.headers;
  const empty =
    h["content-length"] === "0" ||
    (h["content-length"] === undefined && h["transfer-encoding"] === undefined);
  if (empty) delete h["content-type"];
}

export function registerRequestRoutes(app: FastifyInstance, deps: AppDeps): void {
  const schema = { params: requestIdParams };
  // With server.decisionToken set, only holders of it may end requests (ids of others
  // cannot be guessed either: generated ones are 128 random bits).
  const auth = requireBearer(deps.config.server.decisionToken, "server.decisionToken");
  const opts = { schema, onRequest: [auth, allowEmptyBody], config: { maxJsonDepth: 2 } };
  // TTLs are applied before each report, so an expired id is a 404 even if no route swept it.
  const now = () => {
    const nowMs = deps.nowMs();
    deps.inFlight.expire(nowMs);
    return nowMs;
  };
  app.post<{ Params: { id: string } }>("/v1/requests/:id/first-token", opts, async (req) => {
    const nowMs = now();
    return answer(deps.inFlight.firstToken(req.params.id, nowMs), "first_token");
  });
  app.post<{ Params: { id: string } }>("/v1/requests/:id/done", opts, async (req) => {
    const nowMs = now();
    return answer(deps.inFlight.done(req.params.id, nowMs), "done");
  });
  app.post<{ Params: { id: string } }>("/v1/requests/:id/failed", opts, async (req) => {
    const nowMs = now();
    // Before `done`: the prediction's keys are read from the request's in-flight record
    // (an unknown id has none, so nothing is taken back, and it answers 404).
    deps.router.withdrawPrediction(req.params.id);
    return answer(deps.inFlight.done(req.params.id, nowMs), "failed");
  });
}
