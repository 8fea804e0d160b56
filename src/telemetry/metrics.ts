/**
 * kvrouter's Prometheus instruments, all on a registry passed in (a fresh one per app
 * and per test: no globals). Routing metrics are recorded as decisions happen; index,
 * stream, load and in-flight metrics are read from their owners at scrape time through
 * collect callbacks, so the owners keep plain counters and never import prom-client.
 */

import { Counter, collectDefaultMetrics, Gauge, Histogram, type Registry } from "prom-client";
import type { IndexStats } from "../index/types.js";
import type { StreamState } from "../ingest/stream-state.js";
import type { InFlightTotals, LoadView } from "../load/types.js";

/** Where scrape-time metrics come from; each is optional (tests wire only what they need). */
export interface MetricSources {
  readonly indexStats?: () => IndexStats;
  readonly streams?: () => Iterable<StreamState>;
  readonly loads?: () => Iterable<LoadView>;
  readonly inFlight?: () => Iterable<readonly [string, InFlightTotals]>;
  /** Requests callers never reported (ended by TTL) and records dropped by the cap. */
  readonly unreported?: () => {
    readonly prefills: number;
    readonly requests: number;
    readonly dropped: number;
  };
  /** Clock for staleness ages (ms). */
  readonly nowMs: () => number;
}

/** Durations of one routing decision's phases, in milliseconds. */
export interface RoutePhases {
  readonly hashingMs: number;
  readonly matchingMs: number;
  readonly scoringMs: number;
  readonly totalMs: number;
}

/** What the HTTP layer records for each routing call. */
export interface RouterMetrics {
  /** A worker was chosen. `overlapRatio` = cached blocks / prompt blocks (0 when no block). */
  recordDecision(worker: string, reason: string, overlapRatio: number, phases: RoutePhases): void;
  /** No worker could be chosen (`code` is the HTTP error code). */
  recordFailure(code: string): void;
}

const LATENCY_BUCKETS = [
  0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
];
const RATIO_BUCKETS = [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1];

/** Set a counter to absolute values read from an owner (used inside collect callbacks). */
function setCounter<L extends string>(
  c: Counter<L>,
  rows: Iterable<readonly [Partial<Record<L, string>>, number]>,
): void {
  c.reset();
  for (const [labels, value] of rows) if (value >= 0) c.inc(labels, value);
}

function* streamRows<L extends string>(
  sources: MetricSources,
  pick: (s: StreamState) => Iterable<readonly [Partial<Record<L, string>>, number]>,
): Generator<readonly [Partial<Record<L, string>>, number]> {
  if (sources.streams === undefined) return;
  for (const s of sources.streams()) yield* pick(s);
}

function* entries(
  worker: string,
  label: "reason" | "code" | "kind",
  record: Readonly<Record<string, number>>,
): Generator<readonly [Record<string, string>, number]> {
  for (const [k, v] of Object.entries(record)) yield [{ worker, [label]: k }, v];
}

/**
 * Register every kvrouter instrument and Node's process metrics on `registry`.
 * Call once per registry.
 */
export function createMetrics(registry: Registry, sources: MetricSources): RouterMetrics {
  const registers = [registry];
  collectDefaultMetrics({ register: registry });

  const decisions = new Counter({
    name: "kvrouter_route_decisions_total",
    help: "Routing decisions by chosen worker (id#rank) and reason for the choice",
    labelNames: ["worker", "reason"] as const,
    registers,
  });
  const failures = new Counter({
    name: "kvrouter_route_failures_total",
    help: "Routing calls that chose no worker, by error code",
    labelNames: ["code"] as const,
    registers,
  });
  const latency = new Histogram({
    name: "kvrouter_route_duration_seconds",
    help: "Routing decision latency by phase (hashing, matching, scoring, total)",
    labelNames: ["phase"] as const,
    buckets: LATENCY_BUCKETS,
    registers,
  });
  const overlap = new Histogram({
    name: "kvrouter_route_overlap_ratio",
    help: "Fraction of the prompt's blocks cached on the chosen worker (any tier)",
    buckets: RATIO_BUCKETS,
    registers,
  });

  new Counter({
    name: "kvrouter_events_applied_total",
    help: "KV events applied to the index, by event type and outcome status",
    labelNames: ["type", "status"] as const,
    registers,
    collect() {
      if (sources.indexStats === undefined) return;
      const rows = Object.entries(sources.indexStats().outcomes).map(([key, n]) => {
        const [type = key, status = ""] = key.split("/");
        return [{ type, status }, n] as const;
      });
      setCounter(this, rows);
    },
  });
  const perStream = (
    name: string,
    help: string,
    pick: (s: StreamState) => Iterable<readonly [Record<string, string>, number]>,
    extra: string[] = [],
  ) =>
    new Counter({
      name,
      help,
      labelNames: ["worker", ...extra],
      registers,
      collect() {
        setCounter(this, streamRows(sources, pick));
      },
    });
  perStream("kvrouter_events_batches_total", "Event batches handled per stream", (s) => [
    [{ worker: s.worker }, s.batches],
  ]);
  perStream("kvrouter_events_gaps_total", "Sequence gaps seen per stream", (s) => [
    [{ worker: s.worker }, s.gaps],
  ]);
  perStream("kvrouter_events_replays_total", "Replay requests sent per stream", (s) => [
    [{ worker: s.worker }, s.replays],
  ]);
  perStream(
    "kvrouter_events_replay_failures_total",
    "Replays that did not complete, by reason",
    (s) => entries(s.worker, "reason", s.replayFailures),
    ["reason"],
  );
  perStream(
    "kvrouter_events_resets_total",
    "Times a worker's index entries were dropped, by reason",
    (s) => entries(s.worker, "reason", s.resets),
    ["reason"],
  );
  perStream(
    "kvrouter_events_decode_errors_total",
    "Undecodable batches skipped, by decode error code",
    (s) => entries(s.worker, "code", s.decodeErrors),
    ["code"],
  );
  perStream(
    "kvrouter_events_skipped_total",
    "Events recognised but not applied (unknown tag, non-main KV group, unknown keys)",
    (s) => entries(s.worker, "kind", s.skipped as unknown as Record<string, number>),
    ["kind"],
  );
  perStream(
    "kvrouter_events_malformed_frames_total",
    "Messages that were not [topic, seq, payload]",
    (s) => [[{ worker: s.worker }, s.malformedFrames]],
  );
  new Gauge({
    name: "kvrouter_events_connected",
    help: "1 when the stream's SUB socket is connected to its publisher",
    labelNames: ["worker"] as const,
    registers,
    collect() {
      this.reset();
      for (const [l, v] of streamRows(sources, (s) => [
        [{ worker: s.worker }, s.connected ? 1 : 0],
      ]))
        this.set(l, v);
    },
  });
  new Gauge({
    name: "kvrouter_events_current",
    help: "0 while the stream catches up (replay in flight or due): its matches are not current",
    labelNames: ["worker"] as const,
    registers,
    collect() {
      this.reset();
      for (const [l, v] of streamRows(sources, (s) => [[{ worker: s.worker }, s.current ? 1 : 0]]))
        this.set(l, v);
    },
  });

  const indexGauge = (name: string, help: string, pick: (s: IndexStats) => number) =>
    new Gauge({
      name,
      help,
      registers,
      collect() {
        if (sources.indexStats !== undefined) this.set(pick(sources.indexStats()));
      },
    });
  indexGauge("kvrouter_index_nodes", "Radix tree nodes", (s) => s.nodes);
  indexGauge("kvrouter_index_blocks", "Blocks held, summed over workers", (s) => s.workerBlocks);
  indexGauge("kvrouter_index_workers", "Workers present in the index", (s) => s.workers);
  indexGauge(
    "kvrouter_index_reclaim_pending_blocks",
    "Blocks of cleared workers not yet reclaimed (never matched)",
    (s) => s.reclaimPendingBlocks,
  );
  const indexCounter = (name: string, help: string, pick: (s: IndexStats) => number) =>
    new Counter({
      name,
      help,
      registers,
      collect() {
        if (sources.indexStats !== undefined) setCounter(this, [[{}, pick(sources.indexStats())]]);
      },
    });
  indexCounter(
    "kvrouter_index_cap_evictions_total",
    "Index entries evicted (least recently stored first) at index.maxBlocks",
    (s) => s.capEvictions,
  );
  indexCounter(
    "kvrouter_index_overflow_resets_total",
    "Workers reset for holding more GPU blocks than their engine has (lost removals)",
    (s) => s.overflowResets,
  );

  registerLoadMetrics(registry, sources);
  // Children bound once: the hot path skips hashing the label set on every observation.
  const hashing = latency.labels({ phase: "hashing" });
  const matching = latency.labels({ phase: "matching" });
  const scoring = latency.labels({ phase: "scoring" });
  const total = latency.labels({ phase: "total" });
  return {
    recordDecision(worker, reason, overlapRatio, phases) {
      decisions.inc({ worker, reason });
      overlap.observe(overlapRatio);
      hashing.observe(phases.hashingMs / 1000);
      matching.observe(phases.matchingMs / 1000);
      scoring.observe(phases.scoringMs / 1000);
      total.observe(phases.totalMs / 1000);
    },
    recordFailure(code) {
      failures.inc({ code });
    },
  };
}

/** Per-worker load, staleness, scrape errors and in-flight requests. */
function registerLoadMetrics(registry: Registry, sources: MetricSources): void {
  const registers = [registry];
  const loadGauge = (name: string, help: string, pick: (v: LoadView) => number | null) =>
    new Gauge({
      name,
      help,
      labelNames: ["worker"] as const,
      registers,
      collect() {
        this.reset();
        if (sources.loads === undefined) return;
        for (const view of sources.loads()) {
          const value = pick(view);
          if (value !== null) this.set({ worker: view.worker }, value);
        }
      },
    });
  loadGauge("kvrouter_load_running_requests", "Running requests (last snapshot)", (v) =>
    v.snapshot === null ? null : v.snapshot.running,
  );
  loadGauge("kvrouter_load_waiting_requests", "Waiting requests (last snapshot)", (v) =>
    v.snapshot === null ? null : v.snapshot.waiting,
  );
  loadGauge("kvrouter_load_kv_usage_ratio", "GPU KV cache usage 0..1 (last snapshot)", (v) =>
    v.snapshot === null ? null : v.snapshot.kvUsage,
  );
  loadGauge("kvrouter_load_stale", "1 when the worker's load information is stale", (v) =>
    v.stale ? 1 : 0,
  );
  loadGauge(
    "kvrouter_load_unreachable",
    "1 while the worker is out of the candidates because nothing answered (docs/load.md)",
    (v) => (v.unreachable === null ? 0 : 1),
  );
  loadGauge(
    "kvrouter_load_unreachable_transitions",
    "Times the worker was taken out as unreachable since it was added",
    (v) => v.timesUnreachable,
  );
  loadGauge("kvrouter_load_staleness_seconds", "Age of the last successful scrape or push", (v) =>
    v.lastSuccessMs === null ? null : Math.max(0, sources.nowMs() - v.lastSuccessMs) / 1000,
  );
  new Counter({
    name: "kvrouter_load_scrape_errors_total",
    help: "Failed scrapes of a worker's /metrics",
    labelNames: ["worker"] as const,
    registers,
    collect() {
      if (sources.loads === undefined) return;
      setCounter(
        this,
        [...sources.loads()].map((v) => [{ worker: v.worker }, v.totalFailures] as const),
      );
    },
  });
  new Gauge({
    name: "kvrouter_inflight_requests",
    help: "Requests routed by this router and not yet done, per worker",
    labelNames: ["worker"] as const,
    registers,
    collect() {
      this.reset();
      if (sources.inFlight === undefined) return;
      for (const [worker, t] of sources.inFlight()) this.set({ worker }, t.activeRequests);
    },
  });
  new Counter({
    name: "kvrouter_inflight_unreported_total",
    help: "Routed requests whose caller never reported first-token (report=first_token) or done (report=done) before the TTL, or that were dropped by inFlight.maxPerWorker (report=dropped)",
    labelNames: ["report"] as const,
    registers,
    collect() {
      if (sources.unreported === undefined) return;
      const u = sources.unreported();
      setCounter(this, [
        [{ report: "first_token" }, u.prefills],
        [{ report: "done" }, u.requests],
        [{ report: "dropped" }, u.dropped],
      ]);
    },
  });
}
