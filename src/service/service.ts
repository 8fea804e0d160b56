/**
 * The whole routing service as one object: index, registry, load tracking, in-flight
 * bookkeeping, event subscribers, scrapers, router and HTTP app, built from a validated
 * config. `main` listens and handles signals; tests build the same service on loopback.
 */

import { performance } from "node:perf_hooks";
import type { FastifyInstance } from "fastify";
import { Registry } from "prom-client";
import { parseTokenizerSpecs } from "../config/tokenizer-specs.js";
import type { KvrouterConfig } from "../config/types.js";
import { Fleet } from "../fleet/fleet.js";
import { Gateway, type GatewayDeps } from "../gateway/gateway.js";
import { GatewayTokenizers, loadLocalTokenizers } from "../gateway/tokenizers.js";
import { buildApp } from "../http/build-app.js";
import { drainConnections } from "../http/server-limits.js";
import { RadixTreeIndex } from "../index/radix-tree.js";
import type { PrefixIndex } from "../index/types.js";
import { HttpEventStreams } from "../ingest/http-event-streams.js";
import { MetricsScraper } from "../ingest/metrics-scraper.js";
import { SubscriberPool } from "../ingest/subscriber-pool.js";
import { InFlightTracker } from "../load/in-flight.js";
import { LoadTracker } from "../load/load-tracker.js";
import { WorkerRegistry } from "../load/worker-registry.js";
import { createReplicaSharing } from "../replicas/replica-sharing.js";
import { Router } from "../router.js";
import type { Logger } from "../telemetry/logger.js";
import { registerPredictMetrics } from "../telemetry/predict-metrics.js";
import { registerReplicaMetrics } from "../telemetry/replica-metrics.js";
import { registerSnapshotMetrics } from "../telemetry/snapshot-metrics.js";
import { IndexUpkeepLoop } from "./index-upkeep.js";
import { newPrediction } from "./prediction.js";
import type { SnapshotStore } from "./snapshot-store.js";
import { warmStart } from "./warm-start.js";

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
  /** The snapshot file (warm restart), null when `snapshot.path` is unset. */
  readonly snapshot: SnapshotStore | null;
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
  const index = new RadixTreeIndex({
    blockSize: config.index.blockSize,
    maxBlocks: config.index.maxBlocks,
  });
  const registry = new WorkerRegistry();
  const loads = new LoadTracker({ staleAfterMs: config.load.staleAfterMs });
  const replicas = createReplicaSharing(config, {
    nowMs,
    logger: logger.child({ component: "replicas" }),
  });
  const inFlight = replicas?.inFlight ?? new InFlightTracker(config.inFlight);
  const pool = new SubscriberPool(
    index,
    // Receive and decode on a worker thread, apply here: ~1.4× the ingest rate of one
    // thread when a core is free (docs/ingestion.md).
    { ...config.events, decodeThread: true },
    {
      logger: logger.child({ component: "events" }),
      now: nowMs,
      onConnection: (key, connected) => fleet.onStreamConnection(key, connected),
    },
  );
  const scrapes = new MetricsScraper({
    tracker: loads,
    intervalMs: config.load.scrapeIntervalMs,
    timeoutMs: config.load.scrapeTimeoutMs,
    nowMs,
    logger: logger.child({ component: "scraper" }),
  });
  // The streams pushed over HTTP are defined below; read them when the loop runs.
  const streams = () => [...pool.states(), ...httpEvents.states()];
  const prediction = newPrediction(config, { streams, registry, loads, nowMs, logger });
  const fleet = new Fleet({
    index,
    registry,
    loads,
    inFlight,
    pool,
    scrapes,
    nowMs,
    ...(prediction === null ? {} : { onRemoved: (key) => prediction.loop.forget(key) }),
  });
  const httpEvents = new HttpEventStreams({
    index,
    log: logger.child({ component: "events" }),
    nowMs,
    owner: (id) => fleet.get(id),
  });
  const snapshots = await warmStart(config, index, pool, logger.child({ component: "snapshot" }));
  const router = new Router({
    ...(prediction === null ? {} : { predicted: prediction.predicted }),
    index,
    registry,
    loads,
    inFlight,
    config: config.scheduler,
    maxInFlightPerWorker: config.inFlight.maxPerWorker,
    prefillTokensPerSec: config.inFlight.prefillTokensPerSec,
    prefillOverheadMs: config.inFlight.prefillOverheadMs,
    candidateBreakdownLimit: config.server.routeCandidates,
    rng: options.rng ?? Math.random,
    clock: () => performance.now(),
    ...(replicas === null ? {} : { extraLoad: replicas.book }),
  });
  const metricsRegistry = new Registry();
  const gw = config.gateway.enabled
    ? await newGateway(config, {
        router,
        registry,
        loads,
        inFlight,
        logger,
        metricsRegistry,
        nowMs,
        markUnreachable: (key, reason) => fleet.markUnreachable(key, reason),
      })
    : undefined;
  const gateway = gw?.gateway;
  const { app, drain } = await buildApp({
    config,
    router,
    index,
    registry,
    loads,
    inFlight,
    fleet,
    streams,
    httpEvents,
    catchingUp: () => pool.catchingUp(),
    ...(prediction === null ? {} : { degraded: () => prediction.loop.degraded() }),
    logger,
    nowMs,
    ...(replicas === null ? {} : { replicaSync: () => replicas.sync.status() }),
    metricsRegistry,
    ...(gateway === undefined ? {} : { gateway }),
    snapshot: () => snapshots.store.export(),
  });
  registerSnapshotMetrics(metricsRegistry, () => snapshots.store.status());
  if (replicas !== null) registerReplicaMetrics(metricsRegistry, () => replicas.sync.status());
  if (prediction !== null) registerPredictMetrics(metricsRegistry, prediction.metrics);
  for (const w of config.workers) {
    const added = await fleet.add(w);
    if (!added.ok) {
      await pool.close();
      await gw?.tokenizers.close();
      throw new Error(`worker ${w.id}: ${added.message}`);
    }
  }
  snapshots.started();
  if (options.scrape !== false) scrapes.start();
  replicas?.sync.start();
  const upkeep = new IndexUpkeepLoop({ index, registry, loads });
  upkeep.start();
  prediction?.loop.start();
  let closing: Promise<void> | null = null;
  const close = () => {
    closing ??= (async () => {
      // Requests on open connections get 503 + Connection: close for up to drainMs
      // (until none is left), then the server closes.
      drain.start();
      gateway?.drain();
      await drainConnections(app, config.server.drainMs);
      await app.close();
      upkeep.stop();
      prediction?.loop.stop();
      await gateway?.close();
      await gw?.tokenizers.close();
      await scrapes.stop();
      await snapshots.store.stop();
      // The final state, before the streams stop.
      const last = snapshots.store.writesFile ? snapshots.store.capture() : undefined;
      await pool.close();
      if (last !== undefined) await snapshots.store.write(last);
      await replicas?.sync.close();
    })();
    return closing;
  };
  const snapshot = snapshots.store.writesFile ? snapshots.store : null;
  return { config, app, metricsRegistry, fleet, index, router, snapshot, close };
}

/** Gateway mode: local tokenizers from `gateway.tokenizers`, else the workers' `/tokenize`. */
async function newGateway(
  config: KvrouterConfig,
  d: Pick<
    GatewayDeps,
    "router" | "registry" | "loads" | "inFlight" | "metricsRegistry" | "nowMs" | "markUnreachable"
  > & { readonly logger: Logger },
): Promise<{ gateway: Gateway; tokenizers: GatewayTokenizers }> {
  const specs = parseTokenizerSpecs(config.gateway.tokenizers);
  if (typeof specs === "string") throw new Error(`gateway.tokenizers: ${specs}`);
  const locals = await loadLocalTokenizers(specs, config.gateway.tokenizerThreads);
  let tokenizers: GatewayTokenizers | null = null;
  const gateway = new Gateway({
    ...d,
    logger: d.logger.child({ component: "gateway" }),
    config: config.gateway,
    tokenizerFor: (model) => tokenizers!.for(model),
  });
  tokenizers = new GatewayTokenizers(locals, {
    registry: d.registry,
    timeoutMs: config.gateway.tokenizeTimeoutMs,
    authorization: gateway.workerAuthorization(undefined),
    healthy: (workerId) => gateway.breakers.allows(workerId),
  });
  for (const [model, t] of locals) {
    d.logger.info(
      { model: model ?? "*", dir: t.files.dir, mode: t.mode },
      `gateway tokenizes ${model ?? "every other model"} locally`,
    );
  }
  return { gateway, tokenizers };
}
