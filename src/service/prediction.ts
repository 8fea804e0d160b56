/**
 * Wiring of predict-on-route and the degraded-mode fallback (docs/prediction.md): the
 * `PredictedBlocks` the router consults, the loop that switches broken streams to the
 * approximate view, and what the metrics read. Null when both are off.
 */

import type { KvrouterConfig } from "../config/types.js";
import type { StreamState } from "../ingest/stream-state.js";
import type { LoadTracker } from "../load/load-tracker.js";
import type { WorkerRegistry } from "../load/worker-registry.js";
import { PredictedBlocks } from "../predict/predicted-blocks.js";
import type { Logger } from "../telemetry/logger.js";
import type { PredictMetricsSource } from "../telemetry/predict-metrics.js";
import { StreamHealthLoop } from "./stream-health-loop.js";

export interface Prediction {
  readonly predicted: PredictedBlocks;
  readonly loop: StreamHealthLoop;
  readonly metrics: PredictMetricsSource;
}

export function newPrediction(
  config: KvrouterConfig,
  d: {
    /** Every KV event stream: ZeroMQ subscribers and streams pushed over HTTP. */
    streams: () => readonly StreamState[];
    registry: WorkerRegistry;
    loads: LoadTracker;
    nowMs: () => number;
    logger: Logger;
  },
): Prediction | null {
  const c = config.predict;
  if (c.ttlMs === 0 && !c.fallback) return null;
  const predicted = new PredictedBlocks({
    ttlMs: c.ttlMs,
    maxBlocksPerWorker: c.maxBlocksPerWorker,
    degradedTtlMs: c.degradedTtlMs,
  });
  const loop = new StreamHealthLoop({
    predicted,
    streams: d.streams,
    registry: d.registry,
    loads: d.loads,
    nowMs: d.nowMs,
    logger: d.logger.child({ component: "stream-health" }),
    fallback: c.fallback,
    health: { silentAfterMs: c.silentAfterMs, recoverAfterMs: c.recoverAfterMs },
    defaultCapacityBlocks: c.maxBlocksPerWorker,
    // Often enough to see a window a few times over (1 s at the defaults).
    intervalMs: Math.max(10, Math.min(1000, c.silentAfterMs / 4, c.recoverAfterMs / 4)),
  });
  return {
    predicted,
    loop,
    metrics: {
      stats: () => predicted.stats(),
      degraded: () => loop.degraded(),
      workers: () => d.streams().map((s) => s.worker),
      transitions: () => loop.transitions,
    },
  };
}
