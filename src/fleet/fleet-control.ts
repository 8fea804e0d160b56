/**
 * The fleet's run-time membership contract: what the HTTP layer's `/v1/workers` routes
 * call, implemented by `Fleet` beside it.
 */

import type { WorkerConfig } from "../config/types.js";
import type { WorkerKey } from "../protocol/worker.js";

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
  /**
   * A caller could not connect to this worker rank (refused, reset, timed out): take it
   * out of the candidates at once; it is back at its next successful scrape or push (a
   * scrape is started now). False if no such rank is registered. Rules: docs/load.md.
   */
  markUnreachable(key: WorkerKey, reason: string): boolean;
}
