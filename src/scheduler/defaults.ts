/**
 * Default scheduler weights and switches, in one place so the trace simulator's tuning
 * can change them without touching the logic. Reasoning for each value:
 * `docs/cost-function.md`.
 */

import type { CostWeights, SchedulerConfig } from "./types.js";

export const DEFAULT_WEIGHTS: CostWeights = Object.freeze({
  prefill: 1,
  pending: 0.05,
  decode: 0.01,
  queue: 2,
  host: 0.15,
  disk: 0.4,
  store: 0.5,
});

export const DEFAULT_SCHEDULER_CONFIG: SchedulerConfig = Object.freeze({
  weights: DEFAULT_WEIGHTS,
  temperature: 0,
  outlierStdK: 2,
  kvHardCap: 0.97,
  stalePolicy: "exclude",
  stalePenalty: 64,
});

/**
 * A worker is a KV outlier (above mean + k·std of the fleet) only while its KV load is
 * also above this: with this much of its cache still free a worker has the headroom to
 * serve its own cache hits, however far above its peers one long prompt has put it.
 * Measured in docs/replay.md ("KV-outlier exclusion").
 */
export const OUTLIER_MIN_KV_LOAD = 0.8;
