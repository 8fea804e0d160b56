/**
 * Instruments of predict-on-route and the degraded-mode fallback (docs/prediction.md),
 * read at scrape time: predicted blocks held and where they went, and which ranks are
 * routed by their approximate view because their event stream broke.
 */

import { Counter, Gauge, type Registry } from "prom-client";
import type { PredictedStats } from "../predict/predicted-blocks.js";
import { DEGRADED_REASONS } from "../predict/stream-health.js";

export interface PredictMetricsSource {
  stats(): PredictedStats;
  degraded(): ReadonlyMap<string, { reason: string }>;
  /** Ranks with a stream (each gets a 0/1 series per reason). */
  workers(): readonly string[];
  transitions(): number;
}

export function registerPredictMetrics(registry: Registry, src: PredictMetricsSource): void {
  const registers = [registry];
  new Gauge({
    name: "kvrouter_worker_degraded",
    help: "1 while a rank is routed by its approximate view (its KV event stream broke), by reason",
    labelNames: ["worker", "reason"] as const,
    registers,
    collect() {
      this.reset();
      const d = src.degraded();
      for (const w of src.workers()) {
        const now = d.get(w)?.reason;
        for (const r of DEGRADED_REASONS) this.set({ worker: w, reason: r }, now === r ? 1 : 0);
      }
    },
  });
  new Gauge({
    name: "kvrouter_predicted_blocks",
    help: "Blocks counted as held because the router sent them (not yet confirmed by events)",
    registers,
    collect() {
      this.set(src.stats().blocks);
    },
  });
  const counters = [
    ["confirmed", "Predicted blocks replaced by the engine's own report"],
    ["expired", "Predicted blocks dropped at their TTL"],
    ["evicted", "Predicted blocks dropped at the per-worker cap"],
    ["withdrawn", "Predicted blocks taken back: their request never reached the engine"],
  ] as const;
  for (const [field, help] of counters) {
    new Counter({
      name: `kvrouter_predicted_blocks_${field}_total`,
      help,
      registers,
      collect() {
        this.reset();
        this.inc(src.stats()[field]);
      },
    });
  }
  new Counter({
    name: "kvrouter_degraded_transitions_total",
    help: "Times a rank entered degraded mode",
    registers,
    collect() {
      this.reset();
      this.inc(src.transitions());
    },
  });
}
