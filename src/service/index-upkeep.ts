/**
 * The index's chores on the service's event loop (the index itself has no timers):
 *
 * - reclaiming cleared workers' memory: a clear is O(1) for routing, and the entries are
 *   freed here in slices of about a millisecond, one per `setImmediate` turn, so HTTP and
 *   event handling run between slices;
 * - telling the index each worker's GPU capacity, the configured `numGpuBlocks` if set,
 *   else what the engine reports (`vllm:cache_config_info`): a worker found holding more
 *   is reset by the index (lost removals).
 */

import type { IndexUpkeep } from "../index/types.js";
import type { LoadTracker } from "../load/load-tracker.js";
import type { WorkerRegistry } from "../load/worker-registry.js";
import type { WorkerKey } from "../protocol/worker.js";

export interface IndexUpkeepOptions {
  readonly index: IndexUpkeep;
  readonly registry: WorkerRegistry;
  readonly loads: LoadTracker;
  /** How often capacities are synced and reclamation is looked for (ms). */
  readonly intervalMs?: number;
}

export class IndexUpkeepLoop {
  readonly #o: IndexUpkeepOptions;
  readonly #sent = new Map<WorkerKey, number | null>();
  #timer: NodeJS.Timeout | null = null;
  #reclaiming = false;

  constructor(options: IndexUpkeepOptions) {
    this.#o = options;
  }

  start(): void {
    if (this.#timer !== null) return;
    this.#timer = setInterval(() => this.tick(), this.#o.intervalMs ?? 100);
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#timer = null;
  }

  /** One round: sync capacities, and start reclaiming if there is anything to reclaim. */
  tick(): void {
    this.syncCapacities();
    if (this.#o.index.reclaimPending && !this.#reclaiming) {
      this.#reclaiming = true;
      setImmediate(this.#slice);
    }
  }

  /** Sends each registered worker's capacity to the index when it changed. */
  syncCapacities(): void {
    const { index, registry, loads } = this.#o;
    const live = new Set<WorkerKey>();
    for (const w of registry.list()) {
      live.add(w.key);
      const cap = w.numGpuBlocks ?? loads.snapshot(w.key)?.numGpuBlocks ?? null;
      if (this.#sent.get(w.key) === cap) continue;
      this.#sent.set(w.key, cap);
      index.setWorkerCapacity(w.key, cap);
    }
    for (const key of this.#sent.keys()) {
      if (live.has(key)) continue;
      this.#sent.delete(key);
      index.setWorkerCapacity(key, null);
    }
  }

  readonly #slice = (): void => {
    if (this.#timer === null || !this.#o.index.reclaim()) {
      this.#reclaiming = false;
      return;
    }
    setImmediate(this.#slice);
  };
}
