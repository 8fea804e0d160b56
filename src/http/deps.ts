/**
 * What the HTTP app needs from the rest of the service. `main` wires the real objects;
 * tests wire the same classes on loopback. The app owns nothing but its prom registry.
 */

import type { Registry } from "prom-client";
import type { KvrouterConfig, WorkerConfig } from "../config/types.js";
import type { PrefixIndex } from "../index/types.js";
import type { InFlightTracker } from "../load/in-flight.js";
import type { LoadTracker } from "../load/load-tracker.js";
import type { WorkerRegistry } from "../load/worker-registry.js";
import type { WorkerKey } from "../protocol/worker.js";
import type { Router } from "../router.js";
import type { StreamState } from "../sources/stream-state.js";
import type { Logger } from "../telemetry/logger.js";

/** Adding a worker can fail for reasons only known at run time. */
export type FleetAddResult =
  | { readonly ok: true; readonly keys: readonly WorkerKey[] }
  | {
      readonly ok: false;
      readonly code: "worker_exists" | "invalid_worker";
      readonly message: string;
    };

/** Run-time membership: one call adds or removes every rank, stream and scraper of a worker. */
export interface FleetControl {
  list(): readonly WorkerConfig[];
  get(id: string): WorkerConfig | undefined;
  add(worker: WorkerConfig): Promise<FleetAddResult>;
  /** False if no such worker. */
  remove(id: string): Promise<boolean>;
}

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
  readonly logger: Logger;
  /** Wall clock in ms (staleness, TTLs). */
  readonly nowMs: () => number;
  /** Prometheus registry for this app; a fresh one is made when absent. */
  readonly metricsRegistry?: Registry;
}
