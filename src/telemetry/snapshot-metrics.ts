/**
 * Instruments of the index snapshot (`kvrouter_snapshot_*`), read from the store's status
 * at scrape time: the last write's duration, size and longest synchronous step, the last
 * success (timestamp and age), writes and failures, exports to peers, and how the index
 * started (warm from a file or a peer, cold, or a snapshot refused, with the reason).
 */

import { Counter, Gauge, type Registry } from "prom-client";

/** What the metrics read; `SnapshotStore.status()` (service/snapshot-store.ts) gives it. */
export interface SnapshotStatus {
  readonly load: {
    readonly result: string;
    readonly source: string;
    readonly reason: string;
  } | null;
  readonly writes: number;
  readonly failures: number;
  readonly exports: number;
  readonly spoiledCaptures: number;
  readonly last: {
    readonly bytes: number;
    readonly totalMs: number;
    readonly captureMs: number;
    readonly maxChunkMs: number;
  } | null;
  /** Wall-clock ms of the last successful write (null = none yet). */
  readonly lastOkMs: number | null;
}

/** Register the snapshot instruments on `registry`, reading `status` when scraped. */
export function registerSnapshotMetrics(
  registry: Registry,
  status: () => SnapshotStatus,
  nowMs: () => number = Date.now,
): void {
  const registers = [registry];
  const gauge = (name: string, help: string, read: (s: SnapshotStatus) => number | null) =>
    new Gauge({
      name,
      help,
      registers,
      collect() {
        const v = read(status());
        if (v === null) this.reset();
        else this.set(v);
      },
    });
  gauge(
    "kvrouter_snapshot_last_write_duration_seconds",
    "Wall time of the last successful snapshot write, from capture to rename",
    (s) => (s.last === null ? null : s.last.totalMs / 1000),
  );
  gauge(
    "kvrouter_snapshot_last_write_max_step_seconds",
    "Longest synchronous step of the last write (the capture or one encoded chunk): the event-loop pause it caused",
    (s) => (s.last === null ? null : Math.max(s.last.captureMs, s.last.maxChunkMs) / 1000),
  );
  gauge(
    "kvrouter_snapshot_size_bytes",
    "Size of the last snapshot written",
    (s) => s.last?.bytes ?? null,
  );
  gauge(
    "kvrouter_snapshot_last_success_timestamp_seconds",
    "Unix time of the last successful snapshot write (absent before the first)",
    (s) => (s.lastOkMs === null ? null : s.lastOkMs / 1000),
  );
  gauge(
    "kvrouter_snapshot_age_seconds",
    "Time since the last successful snapshot write (-1 = none yet)",
    (s) => (s.lastOkMs === null ? -1 : (nowMs() - s.lastOkMs) / 1000),
  );
  const counters = [
    ["writes", "kvrouter_snapshot_writes_total", "Snapshot files written"],
    ["failures", "kvrouter_snapshot_write_failures_total", "Snapshot writes that failed"],
    ["exports", "kvrouter_snapshot_exports_total", "Snapshots served whole on GET /v1/snapshot"],
    [
      "spoiledCaptures",
      "kvrouter_snapshot_capture_retries_total",
      "Index copies taken in steps that a change outside the event queue spoiled (taken again)",
    ],
  ] as const;
  for (const [field, name, help] of counters) {
    new Counter({
      name,
      help,
      registers,
      collect() {
        this.reset();
        this.inc(status()[field]);
      },
    });
  }
  new Gauge({
    name: "kvrouter_snapshot_load_result",
    help: "1 for how the index started: result warm|cold|refused, source file|peer|none, and why",
    labelNames: ["result", "source", "reason"] as const,
    registers,
    collect() {
      this.reset();
      const l = status().load;
      if (l !== null) this.set({ result: l.result, source: l.source, reason: l.reason }, 1);
    },
  });
}
