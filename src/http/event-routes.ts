/**
 * `POST /v1/workers/:id/events`: KV events pushed over HTTP by engines that cannot
 * speak ZeroMQ (docs/custom-engines.md, docs/http-api.md). The JSON batch is checked
 * and transcoded to vLLM's wire bytes (`events-body.ts`), then sequenced and applied by
 * `HttpEventStreams` under the ZeroMQ streams' rules. Behind `server.authToken`. A worker
 * whose events come over ZeroMQ (`events_endpoint` set) refuses pushes: two sources
 * would interleave their sequence numbers.
 */

import { createHash } from "node:crypto";
import type { FastifyInstance } from "fastify";
import { encodeEventBatch } from "../protocol/event-encoder.js";
import { requireBearer } from "./auth.js";
import type { AppDeps } from "./deps.js";
import { ApiError } from "./errors.js";
import { type PushEventsBody, pushEventsBodySchema, toWireBatch } from "./events-body.js";
import { workerIdParams } from "./schemas.js";

/** body → events[] → event → block_hashes[] */
const EVENTS_DEPTH = { maxJsonDepth: 4 };

export function registerEventRoutes(app: FastifyInstance, deps: AppDeps): void {
  const streams = deps.httpEvents;
  if (streams === undefined) return;
  const guard = requireBearer(deps.config.server.authToken);

  app.post<{ Params: { id: string }; Body: PushEventsBody }>(
    "/v1/workers/:id/events",
    {
      schema: { params: workerIdParams, body: pushEventsBodySchema },
      onRequest: guard,
      config: EVENTS_DEPTH,
    },
    async (req) => {
      const { id } = req.params;
      const w = deps.fleet.get(id);
      if (w === undefined) {
        throw new ApiError("worker_not_found", `no worker ${JSON.stringify(id)}`);
      }
      if (w.eventsEndpoint !== null) {
        throw new ApiError(
          "events_over_zmq",
          `worker ${id} publishes its KV events on ${w.eventsEndpoint}; register it without events_endpoint to push events over HTTP`,
        );
      }
      const body = req.body;
      const rank = body.dp_rank ?? 0;
      if (rank >= w.dpSize) {
        throw new ApiError(
          "invalid_request",
          `body/dp_rank is ${rank} but worker ${id} has dp_size ${w.dpSize} (ranks 0..${w.dpSize - 1})`,
          [{ path: "body/dp_rank", message: `must be < dp_size ${w.dpSize}` }],
        );
      }
      const batch = toWireBatch(body, rank, deps.nowMs() / 1000);
      const digest = createHash("sha1").update(JSON.stringify(body.events)).digest("base64");
      const out = streams.push(id, rank, BigInt(body.event_id), encodeEventBatch(batch), digest);
      return {
        worker: out.worker,
        event_id: body.event_id,
        outcome: out.outcome,
        reset: out.reset,
        gap: out.gap === null ? null : { from: Number(out.gap.from), to: Number(out.gap.to) },
        last_event_id: out.lastEventId === null ? null : Number(out.lastEventId),
      };
    },
  );
}
