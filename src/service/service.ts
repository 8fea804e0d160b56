/**
 * The whole routing service as one object: index, registry, load tracking, in-flight
 * bookkeeping, event subscribers, scrapers, router and HTTP app, built from a validated
 * config. `main` listens and handles signals; tests build the same service on loopback.
 */

import { performance } from "node:perf_hooks";
import type { FastifyInstance } from "fastify";
import type { Registry } from "prom-client";
import type { KvrouterConfig } from "../config/types.js";
import { Fleet } from "../fleet/fleet.js";
import { buildApp } from "../http/build-app.js";
import { RadixTreeIndex } from "../index/radix-tree.js";
import type { PrefixIndex } from "../index/types.js";
import { MetricsScraper } from "../ingest/metrics-scraper.js";
import { SubscriberPool } from "../ingest/subscriber-pool.js";
import { InFlightTracker } from "../load/in-flight.js";
import { LoadTracker } from "../load/load-tracker.js";
import { WorkerRegistry } from "../load/worker-registry.js";
import { Router } from "../router.js";
import type { Logger } from "../telemetry/logger.js";

export interface ServiceOptions {
  readonly logger: Logger;
  /** Wall clock (ms); default `Date.now`. */
  readonly nowMs?: () => number;
  /** Uniform [0, 1); default `Math.random`. */
  readonly rng?: () => number;
  /** Start scraping workers' /metrics (default true; tests that push load turn it off). */
  readonly scrape?: boolean;
}

export interface Service {
  readonly config: KvrouterConfig;
  readonly app: FastifyInstance;
  readonly metricsRegistry: Registry;
  readonly fleet: Fleet;
  readonly index: PrefixIndex;
  readonly router: Router;
  /** Stop accepting HTTP, close sockets (HTTP, subscribers, scrapers). Idempotent. */
  close(): Promise<void>;
}

/** Build the service and add the configured workers. Does not listen. */
export async function createService(
  config: KvrouterConfig,
  options: ServiceOptions,
): Promise<Service> {
  const nowMs = options.nowMs ?? Date.now;
  const logger = options.logger;
  const index = new RadixTreeIndex({ blockSize: config.index.blockSize });
  const registry = new WorkerRegistry();
  const loads = new LoadTracker({ staleAfterMs: config.load.staleAfterMs });
  const inFlight = new InFlightTracker(config.inFlight);
  const pool = new SubscriberPool(
    index,
    // Receive and decode on a worker thread, apply here: ~1.4× the ingest rate of one
    // thread when a core is free (docs/ingestion.md).
    { ...config.events, decodeThread: true },
    { logger: logger.child({ component: "events" }), now: nowMs },
  );
  const scrapes = new MetricsScraper({
    tracker: loads,
    intervalMs: config.load.scrapeIntervalMs,
    timeoutMs: config.load.scrapeTimeoutMs,
    nowMs,
    logger: logger.child({ component: "scraper" }),
  });
  const fleet = new Fleet({ index, registry, loads, inFlight, pool, scrapes, nowMs });
  const router = new Router({
    index,
    registry,
    loads,
    inFlight,
    config: config.scheduler,
    rng: options.rng ?? Math.random,
    clock: () => performance.now(),
  });
  const { app, metricsRegistry } = await buildApp({
    config,
    router,
    index,
    registry,
    loads,
    inFlight,
    fleet,
    streams: () => pool.states(),
    catchingUp: () => pool.catchingUp(),
    logger,
    nowMs,
  });
  for (const w of config.workers) {
    const added = await fleet.add(w);
    if (!added.ok) {
      await pool.close();
      throw new Error(`worker ${w.id}: ${added.message}`);
    }
  }
  if (options.scrape !== false) scrapes.start();
  let closing: Promise<void> | null = null;
  const close = () => {
    closing ??= (async () => {
      await app.close();
      await scrapes.stop();
      await pool.close();
    })();
    return closing;
  };
  return { config, app, metricsRegistry, fleet, index, router, close };
}
