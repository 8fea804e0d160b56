/**
 * Run-time fleet membership: one place that keeps the worker registry, the event
 * subscribers, the load tracker, the scrapers, the in-flight records, the index and
 * (through `onRemoved`) the predictions in step when a worker (all its data-parallel
 * ranks) is added or removed, whether from the config at start-up or from
 * `POST/DELETE /v1/workers`.
 */

import type { WorkerConfig } from "../config/types.js";
import type { PrefixIndex } from "../index/types.js";
import type { MetricsScraper } from "../ingest/metrics-scraper.js";
import type { SubscriberPool } from "../ingest/subscriber-pool.js";
import type { InFlightTracker } from "../load/in-flight.js";
import type { LoadTracker } from "../load/load-tracker.js";
import { type WorkerRegistry, WorkerSpecError } from "../load/worker-registry.js";
import { type WorkerKey, workerKey } from "../protocol/worker.js";
import type { FleetAddResult, FleetControl } from "./fleet-control.js";

/** Periodic load scraping per worker rank (a `MetricsScraper`). */
export type ScrapeControl = Pick<MetricsScraper, "add" | "remove" | "scrapeOnce">;

export interface FleetDeps {
  readonly index: PrefixIndex;
  readonly registry: WorkerRegistry;
  readonly loads: LoadTracker;
  readonly inFlight: InFlightTracker;
  readonly pool: SubscriberPool;
  readonly scrapes: ScrapeControl;
  readonly nowMs: () => number;
  /** Called for each rank removed (drops what predict-on-route holds for it). */
  readonly onRemoved?: (key: WorkerKey) => void;
}

export class Fleet implements FleetControl {
  readonly #d: FleetDeps;
  readonly #workers = new Map<string, WorkerConfig>();
  /** Ids with an add or remove in progress: a second call waits for nothing, it is refused. */
  readonly #busy = new Set<string>();

  constructor(deps: FleetDeps) {
    this.#d = deps;
  }

  list(): readonly WorkerConfig[] {
    return [...this.#workers.values()];
  }

  get(id: string): WorkerConfig | undefined {
    return this.#workers.get(id);
  }

  /** Register every rank, start its event streams and its scraping. */
  async add(w: WorkerConfig): Promise<FleetAddResult> {
    if (this.#workers.has(w.id) || this.#busy.has(w.id)) {
      return {
        ok: false,
        code: "worker_exists",
        message: `worker ${JSON.stringify(w.id)} is already registered`,
      };
    }
    const d = this.#d;
    const keys = Array.from({ length: w.dpSize }, (_, r) => workerKey(w.id, r));
    try {
      for (const [dpRank] of keys.entries()) {
        d.registry.upsert({
          workerId: w.id,
          dpRank,
          url: w.url,
          metricsUrl: w.metricsUrl,
          model: w.model,
          kind: w.kind,
          blockSize: w.blockSize,
          numGpuBlocks: w.numGpuBlocks ?? null,
        });
      }
      if (w.eventsEndpoint !== null) {
        d.pool.add({
          workerId: w.id,
          eventsEndpoint: w.eventsEndpoint,
          replayEndpoint: w.replayEndpoint,
          topic: w.topic,
          dataParallelSize: w.dpSize,
          format: w.kind === "mooncake-store" ? "mooncake" : w.kind,
        });
      }
    } catch (err) {
      d.registry.removeWorker(w.id);
      const message = err instanceof Error ? err.message : String(err);
      if (err instanceof WorkerSpecError) return { ok: false, code: "invalid_worker", message };
      return {
        ok: false,
        code: "invalid_worker",
        message: `cannot start event streams: ${message}`,
      };
    }
    const nowMs = d.nowMs();
    for (const [dpRank, key] of keys.entries()) {
      d.loads.track(key, nowMs);
      if (w.metricsUrl === null) continue;
      const { metricsUrl, kind, model, blockSize } = w;
      d.scrapes.add({ key, metricsUrl, kind, model, dpRank, blockSize });
    }
    this.#workers.set(w.id, w);
    return { ok: true, keys };
  }

  markUnreachable(key: WorkerKey, reason: string): boolean {
    const d = this.#d;
    if (d.registry.get(key) === undefined) return false;
    d.loads.markUnreachable(key, "caller", reason, d.nowMs());
    this.#probe(key);
    return true;
  }

  /**
   * A KV event stream connected or lost its publisher (`SubscriberPool` deps'
   * `onConnection`). A lost stream takes the rank out at once; a reconnect clears that
   * and, for a scraped worker, asks for its load now so that it is back as soon as it
   * answers.
   */
  onStreamConnection(key: WorkerKey, connected: boolean): void {
    const d = this.#d;
    if (d.registry.get(key) === undefined) return;
    if (connected) {
      d.loads.markReachable(key, "events");
      this.#probe(key);
    } else {
      d.loads.markUnreachable(key, "events", "kv event stream disconnected", d.nowMs());
    }
  }

  /** Scrape a rank now when it is scraped (a push-only worker waits for its next push). */
  #probe(key: WorkerKey): void {
    if (this.#d.registry.get(key)?.metricsUrl == null) return;
    void this.#d.scrapes.scrapeOnce(key);
  }

  /** Stop streams and scraping, forget load, in-flight records and index blocks. */
  async remove(id: string): Promise<boolean> {
    const w = this.#workers.get(id);
    if (w === undefined || this.#busy.has(id)) return false;
    this.#busy.add(id);
    try {
      const d = this.#d;
      this.#workers.delete(id);
      d.registry.removeWorker(id);
      await d.pool.remove(id);
      for (let r = 0; r < w.dpSize; r++) {
        const key = workerKey(id, r);
        d.scrapes.remove(key);
        d.loads.forget(key);
        d.inFlight.removeWorker(key);
        d.index.removeWorker(key);
        d.onRemoved?.(key);
      }
      return true;
    } finally {
      this.#busy.delete(id);
    }
  }
}
