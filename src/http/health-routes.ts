/**
 * Liveness, readiness and Prometheus exposition. Ready means: the config was loaded (it
 * was, or the app would not exist) and at least one routable worker has fresh load
 * information, so a decision would rest on something real.
 */

import type { FastifyInstance } from "fastify";
import type { Registry } from "prom-client";
import type { AppDeps } from "./deps.js";
import { ApiError } from "./errors.js";

export function registerHealthRoutes(
  app: FastifyInstance,
  deps: AppDeps,
  registry: Registry,
): void {
  app.get("/healthz", async () => ({ status: "ok" }));

  app.get("/readyz", async () => {
    const nowMs = deps.nowMs();
    const workers = deps.registry.routable(null);
    if (workers.length === 0) {
      throw new ApiError("not_ready", "no routable worker is registered (add one to workers)");
    }
    // Fresh = a successful scrape or push within staleAfterMs (not merely "recently added").
    const states = workers.map((w) => {
      const v = deps.loads.view(w.key, nowMs);
      return { worker: w.key, state: v.lastSuccessMs === null ? "no_load_yet" : v.state };
    });
    const fresh = states.filter((s) => s.state === "fresh");
    // Routing goes on without Redis (on local state): a replica out of sync stays ready
    // and says so here and in kvrouter_replicas_* metrics.
    const replicas = deps.replicaSync === undefined ? {} : { replicas: deps.replicaSync() };
    if (fresh.length === 0) {
      throw new ApiError(
        "not_ready",
        `none of ${workers.length} workers has fresh load information (no successful scrape or push within load.staleAfterMs = ${deps.config.load.staleAfterMs} ms)`,
        { workers: states, ...replicas },
      );
    }
    return { status: "ready", fresh_workers: fresh.length, workers: workers.length, ...replicas };
  });

  app.get("/metrics", async (_req, reply) => {
    const text = await registry.metrics();
    return reply.type(registry.contentType).send(text);
  });
}
