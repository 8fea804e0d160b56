/**
 * What the HTTP app needs from the rest of the service. `service/` wires the real objects;
 * tests wire the same classes on loopback. The app owns nothing but its prom registry.
 */

import type { Registry } from "prom-client";
import type { KvrouterConfig } from "../config/types.js";
import type { FleetControl } from "../fleet/fleet-control.js";
import type { Gateway } from "../gateway/gateway.js";
import type { PrefixIndex } from "../index/types.js";
import type { HttpEventStreams } from "../ingest/http-event-streams.js";
import type { StreamState } from "../ingest/stream-state.js";
import type { InFlightTracker } from "../load/in-flight.js";
import type { LoadTracker } from "../load/load-tracker.js";
import type { WorkerRegistry } from "../load/worker-registry.js";
import type { ReplicaSyncStatus } from "../replicas/redis-load-sync.js";
import type { Router } from "../router.js";
import type { Logger } from "../telemetry/logger.js";

export interface AppDeps {
  readonly config: KvrouterConfig;
  readonly router: Router;
  readonly index: PrefixIndex;
  readonly registry: WorkerRegistry;
  readonly loads: LoadTracker;
  readonly inFlight: InFlightTracker;
  readonly fleet: FleetControl;
  /** Every event stream's state (e.g. `SubscriberPool.states`). */
  readonly streams: () => readonly StreamState[];
  /**
   * Keys of the streams catching up now (cheap; read on every route and match, e.g.
   * `SubscriberPool.catchingUp`). Absent: every stream counts as current.
   */
  readonly catchingUp?: () => ReadonlySet<string>;
  /**
   * Ranks routed by their approximate view because their event stream broke, with why and
   * since when (docs/prediction.md). Absent: none ever is.
   */
  readonly degraded?: () => ReadonlyMap<string, { reason: string; sinceMs: number }>;
  readonly logger: Logger;
  /** Wall clock in ms (staleness, TTLs). */
  readonly nowMs: () => number;
  /** Load sharing with other replicas, when configured (shown by /readyz). */
  readonly replicaSync?: () => ReplicaSyncStatus;
  /** Gateway mode (the OpenAI routes); absent = decision API only. */
  readonly gateway?: Gateway;
  /** KV event streams pushed over HTTP (`POST /v1/workers/:id/events`); absent = route off. */
  readonly httpEvents?: HttpEventStreams;
  /** The index snapshot taken now, as file bytes (`GET /v1/snapshot`); absent = route off. */
  readonly snapshot?: () => AsyncIterable<Uint8Array>;
  /** Prometheus registry for this app; a fresh one is made when absent. */
  readonly metricsRegistry?: Registry;
}
