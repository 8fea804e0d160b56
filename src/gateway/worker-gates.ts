/**
 * Which workers the gateway may send to, and when it must hold requests back:
 * - down: its circuit refuses requests, or its `/metrics` failed `breakerFailures` times in
 *   a row and its load is stale — never forwarded to while another candidate exists;
 * - busy: past one of the `gateway.busy*` thresholds, on the same effective load the
 *   scheduler sees (scraped + in-flight predictions, `load/effective-load.ts`). When every
 *   candidate that is not down is busy, the admission queue holds new requests.
 */

import type { GatewayConfig } from "../config/types.js";
import { effectiveLoad } from "../load/effective-load.js";
import type { InFlightTracker } from "../load/in-flight.js";
import type { LoadTracker } from "../load/load-tracker.js";
import type { WorkerInfo } from "../load/types.js";
import type { WorkerRegistry } from "../load/worker-registry.js";
import type { WorkerBreakers } from "./breakers.js";

export interface WorkerGatesDeps {
  readonly config: GatewayConfig;
  readonly registry: WorkerRegistry;
  readonly loads: LoadTracker;
  readonly inFlight: InFlightTracker;
  readonly breakers: WorkerBreakers;
  readonly nowMs: () => number;
}

export class WorkerGates {
  readonly #d: WorkerGatesDeps;

  constructor(deps: WorkerGatesDeps) {
    this.#d = deps;
  }

  /** Whether any busy threshold is configured at all. */
  get enabled(): boolean {
    const c = this.#d.config;
    return c.busyWaiting > 0 || c.busyKvUsage > 0 || c.busyPrefillTokens > 0;
  }

  /**
   * Whether every candidate for `model` (only those at `urls`, when given: a LoRA
   * adapter's workers) that is not down is busy (and there is one).
   */
  allBusy(model: string | null, urls: ReadonlySet<string> | null = null): boolean {
    const nowMs = this.#d.nowMs();
    let any = false;
    for (const w of this.#d.registry.routable(model)) {
      if ((urls !== null && !urls.has(w.url)) || this.down(w, nowMs)) continue;
      any = true;
      if (!this.busy(w, nowMs)) return false;
    }
    return any;
  }

  busy(w: WorkerInfo, nowMs: number): boolean {
    const { loads, inFlight, config: c } = this.#d;
    const snapshot = loads.isStale(w.key, nowMs) ? null : loads.snapshot(w.key);
    const all = inFlight.totals(w.key);
    const newer = snapshot === null ? all : inFlight.totalsSince(w.key, snapshot.atMs);
    const load = effectiveLoad(snapshot, all, newer, w.numGpuBlocks);
    return (
      (c.busyWaiting > 0 && load.waiting >= c.busyWaiting) ||
      (c.busyKvUsage > 0 && load.kvLoad !== null && load.kvLoad >= c.busyKvUsage) ||
      (c.busyPrefillTokens > 0 && load.pendingPrefillTokens >= c.busyPrefillTokens)
    );
  }

  /** Known down: its circuit refuses requests, or its /metrics has failed as often. */
  down(w: WorkerInfo, nowMs: number): boolean {
    if (!this.#d.breakers.allows(w.workerId)) return true;
    const v = this.#d.loads.view(w.key, nowMs);
    return v.stale && v.consecutiveFailures >= this.#d.config.breakerFailures;
  }
}
