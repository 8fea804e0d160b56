/**
 * Fleet membership and pushed load: `GET/POST /v1/workers`, `DELETE /v1/workers/:id`,
 * `PUT /v1/workers/:id/load` (ours or Dynamo's `ForwardPassMetrics`, `load-body.ts`). A worker added here obeys the same rules as one in the
 * config file (`validateWorker`); the mutating routes need the bearer token if one is set.
 */

import type { FastifyInstance } from "fastify";
import { validateWorker } from "../config/worker-config.js";
import { type WorkerKey, workerKey } from "../protocol/worker.js";
import { requireBearer } from "./auth.js";
import type { AppDeps } from "./deps.js";
import { ApiError } from "./errors.js";
import { pushedLoad } from "./load-body.js";
import {
  type AddWorkerBody,
  addWorkerBodySchema,
  type PushLoadBody,
  pushLoadBodySchema,
  workerIdParams,
} from "./schemas.js";
import { loadJson, workerJson } from "./worker-view.js";

const toCamel = (s: string) => s.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
const toSnake = (s: string) => s.replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase();

function ranks(id: string, dpSize: number): WorkerKey[] {
  return Array.from({ length: dpSize }, (_, r) => workerKey(id, r));
}

/** Worker and load bodies are flat objects: one level of JSON nesting. */
const FLAT = { maxJsonDepth: 1 };
/** Load bodies: flat, or Dynamo's nested `ForwardPassMetrics` (two levels). */
const LOAD_DEPTH = { maxJsonDepth: 2 };

export function registerWorkerRoutes(app: FastifyInstance, deps: AppDeps): void {
  const guard = requireBearer(deps.config.server.authToken);
  const { fleet, loads, inFlight } = deps;

  /** JSON of one worker or of all; stream states are read once per call. */
  const views = (only?: string) => {
    const byKey = new Map(deps.streams().map((s) => [s.worker, s]));
    const degraded = deps.degraded?.() ?? new Map<string, { reason: string; sinceMs: number }>();
    const nowMs = deps.nowMs();
    inFlight.expire(nowMs); // TTLs apply even while nothing is being routed
    const list =
      only === undefined ? fleet.list() : [fleet.get(only)].filter((w) => w !== undefined);
    return list.map((w) => {
      const view = workerJson(w, ranks(w.id, w.dpSize), {
        load: (k) => loads.view(k, nowMs),
        inFlight: (k) => inFlight.totals(k),
        stream: (k) => byKey.get(k),
        nowMs,
      });
      // Degraded mode per rank (null = precise), and whether any rank is degraded.
      const rankViews = view.ranks.map((r) => {
        const g = degraded.get(r.key);
        return {
          ...r,
          degraded: g === undefined ? null : { reason: g.reason, since_ms: g.sinceMs },
        };
      });
      const withMode = {
        ...view,
        degraded: rankViews.some((r) => r.degraded !== null),
        ranks: rankViews,
      };
      // Gateway mode: the worker's circuit breaker (closed / open / half_open).
      return deps.gateway === undefined
        ? withMode
        : { ...withMode, circuit: deps.gateway.circuit(w.id) };
    });
  };

  app.get("/v1/workers", async () => ({ workers: views() }));

  app.get<{ Params: { id: string } }>(
    "/v1/workers/:id",
    { schema: { params: workerIdParams } },
    async (req) => {
      const [view] = views(req.params.id);
      if (view === undefined) {
        throw new ApiError("worker_not_found", `no worker ${JSON.stringify(req.params.id)}`);
      }
      return view;
    },
  );

  app.post<{ Body: AddWorkerBody }>(
    "/v1/workers",
    { schema: { body: addWorkerBodySchema }, onRequest: guard, config: FLAT },
    async (req, reply) => {
      const raw = Object.fromEntries(Object.entries(req.body).map(([k, v]) => [toCamel(k), v]));
      const checked = validateWorker(raw, "body", deps.config.index.blockSize);
      if (!checked.ok) {
        const details = checked.issues.map((i) => ({
          path: i.key.replace(/^body\.(\w+)/, (_, k: string) => `body/${toSnake(k)}`),
          message: i.message,
        }));
        throw new ApiError(
          "invalid_worker",
          details.map((d) => `${d.path}: ${d.message}`).join("; "),
          details,
        );
      }
      const added = await fleet.add(checked.worker);
      if (!added.ok) throw new ApiError(added.code, added.message);
      deps.logger.info({ worker: checked.worker.id, ranks: added.keys.length }, "worker added");
      return reply.status(201).send(views(checked.worker.id)[0]);
    },
  );

  app.delete<{ Params: { id: string } }>(
    "/v1/workers/:id",
    { schema: { params: workerIdParams }, onRequest: guard },
    async (req) => {
      const { id } = req.params;
      if (!(await fleet.remove(id))) {
        throw new ApiError("worker_not_found", `no worker ${JSON.stringify(id)}`);
      }
      deps.logger.info({ worker: id }, "worker removed");
      return { id, removed: true };
    },
  );

  app.put<{ Params: { id: string }; Body: PushLoadBody }>(
    "/v1/workers/:id/load",
    {
      schema: { params: workerIdParams, body: pushLoadBodySchema },
      onRequest: guard,
      config: LOAD_DEPTH,
    },
    async (req) => {
      const { id } = req.params;
      const w = fleet.get(id);
      if (w === undefined)
        throw new ApiError("worker_not_found", `no worker ${JSON.stringify(id)}`);
      const { load, dpRank: rank } = pushedLoad(req.body);
      if (rank >= w.dpSize) {
        throw new ApiError(
          "invalid_request",
          `body/dp_rank is ${rank} but worker ${id} has dp_size ${w.dpSize} (ranks 0..${w.dpSize - 1})`,
        );
      }
      const nowMs = deps.nowMs();
      const key = workerKey(id, rank);
      loads.update(key, { ...load, atMs: nowMs }, nowMs, "push");
      return { worker: key, load: loadJson(loads.view(key, nowMs), nowMs) };
    },
  );
}
