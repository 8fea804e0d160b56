/**
 * Builds the fastify app from its dependencies without listening, so tests use
 * `app.inject()` and integration tests listen on port 0. One prom registry per app.
 * Per-request logging is off (it would dominate the hot path); errors are still logged.
 *
 * JSON bodies are parsed without secure-json-parse's `__proto__`/`constructor` scan: it
 * runs two regular expressions over the whole text (~10 µs for an 8k-token body). Every
 * route that reads a body has a schema with `additionalProperties: false` at every level,
 * which already rejects those keys with a 400 naming them (tested in
 * test/http-edge-cases.test.ts); a new route reading a body must keep that rule. The JSON
 * parser is our own (`json-depth.ts`: a nesting check, then `JSON.parse`); server limits,
 * the server's own errors and the shutdown drain are in `server-limits.ts`.
 */

import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from "fastify";
import { Registry } from "prom-client";
import { createMetrics, type RouterMetrics } from "../telemetry/metrics.js";
import type { AppDeps } from "./deps.js";
import { installErrorHandling } from "./error-handler.js";
import { registerEventRoutes } from "./event-routes.js";
import { frontServerFactory, GatewayFront } from "./gateway-front.js";
import { registerGatewayRoutes } from "./gateway-routes.js";
import { registerHealthRoutes } from "./health-routes.js";
import { installJsonParser } from "./json-depth.js";
import { registerRequestRoutes } from "./request-routes.js";
import { registerRouteRoutes } from "./route-routes.js";
import { trackRoutes } from "./route-table.js";
import { applyConnectionCap, Drain, serverOptions } from "./server-limits.js";
import { registerSnapshotRoutes } from "./snapshot-routes.js";
import { registerWorkerRoutes } from "./worker-routes.js";

/** Body parsing options (the HTTP benchmark's floor uses the same, to compare like with like). */
export const JSON_PARSING = {
  onProtoPoisoning: "ignore",
  onConstructorPoisoning: "ignore",
} as const;

export interface BuiltApp {
  readonly app: FastifyInstance;
  readonly metricsRegistry: Registry;
  readonly metrics: RouterMetrics;
  /** Start it on shutdown, before `app.close()` (see `service.close`). */
  readonly drain: Drain;
}

/** Create the app with every route registered; call `app.listen` (or `inject`) next. */
export async function buildApp(deps: AppDeps): Promise<BuiltApp> {
  const server = deps.config.server;
  const drain = new Drain();
  // The gateway's two OpenAI POST routes are served ahead of fastify (`gateway-front.ts`).
  const gw = deps.gateway;
  const front =
    gw === undefined
      ? null
      : new GatewayFront({
          gateway: gw,
          authToken: deps.config.gateway.authToken,
          bodyLimitBytes: server.bodyLimitBytes,
          maxJsonDepth: server.maxJsonDepth,
          draining: () => drain.active,
          logger: deps.logger,
        });
  const app = Fastify({
    loggerInstance: deps.logger as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: server.bodyLimitBytes,
    // Strict types: "5" is not a token id. Params are strings and need no coercion.
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, allErrors: false } },
    forceCloseConnections: "idle",
    ...JSON_PARSING,
    ...serverOptions(server),
    serverFactory: frontServerFactory(() => front),
  });
  applyConnectionCap(app, server);
  drain.install(app);
  const metricsRegistry = deps.metricsRegistry ?? new Registry();
  const metrics = createMetrics(metricsRegistry, {
    indexStats: () => deps.index.stats(),
    streams: deps.streams,
    loads: () => {
      const nowMs = deps.nowMs();
      return deps.registry.list().map((w) => deps.loads.view(w.key, nowMs));
    },
    inFlight: () => {
      // Apply TTLs first: the figures must not freeze at their last value when routing stops.
      deps.inFlight.expire(deps.nowMs());
      return deps.inFlight.workers().map((k) => [k, deps.inFlight.totals(k)] as const);
    },
    unreported: () => ({ ...deps.inFlight.expired, dropped: deps.router.droppedInFlight }),
    nowMs: deps.nowMs,
  });
  // JSON only: anything else is a 415 rather than a string the schema then rejects.
  app.removeContentTypeParser("text/plain");
  installJsonParser(app, server.maxJsonDepth);
  installErrorHandling(app, server, trackRoutes(app));
  registerHealthRoutes(app, deps, metricsRegistry);
  registerRouteRoutes(app, deps, metrics);
  registerRequestRoutes(app, deps);
  registerWorkerRoutes(app, deps);
  registerEventRoutes(app, deps);
  if (deps.snapshot !== undefined) registerSnapshotRoutes(app, deps.snapshot, server.authToken);
  if (deps.gateway !== undefined) {
    registerGatewayRoutes(app, deps.gateway, deps.config.gateway.authToken, server.maxJsonDepth);
  }
  await app.ready();
  return { app, metricsRegistry, metrics, drain };
}
