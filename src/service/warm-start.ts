/**
 * Warm restart at start-up (docs/index.md, "Warm restart"): with `snapshot.path` set, the
 * saved index is restored before any worker is added, and each saved stream resumes from
 * its last applied batch (the engine's copy of that batch is compared first: a restarted
 * engine, or one whose buffer no longer reaches back, is cleared alone). A refused
 * snapshot leaves the index empty: cold start. Then the store writes periodically.
 */

import type { KvrouterConfig } from "../config/index.js";
import type { RadixTreeIndex } from "../index/radix-tree.js";
import { restoreSnapshot } from "../index/snapshot-codec.js";
import type { SubscriberPool } from "../ingest/subscriber-pool.js";
import type { WorkerKey } from "../protocol/worker.js";
import type { LogSink } from "../util/log-sink.js";
import { SnapshotStore } from "./snapshot-store.js";

export interface WarmStart {
  readonly store: SnapshotStore;
  /** Call once the configured workers are added: clears what no stream resumed, starts writing. */
  started(): void;
}

export function warmStart(
  config: KvrouterConfig,
  index: RadixTreeIndex,
  pool: SubscriberPool,
  logger: LogSink,
): WarmStart | null {
  const path = config.snapshot.path;
  if (path === null) return null;
  const access = index.snapshotAccess();
  const store = new SnapshotStore(
    { path, intervalMs: config.snapshot.intervalMs, blockSize: config.index.blockSize, logger },
    { access, streams: () => pool.saved() },
  );
  const t0 = performance.now();
  const snap = store.load();
  let restored = new Map<WorkerKey, number>();
  if (snap !== null) {
    // Only workers whose stream can be resumed: anything else would be served unverified.
    const resumable = new Set(snap.streams.map((s) => s.worker));
    restored = restoreSnapshot(access, snap, (w) => resumable.has(w));
    pool.resumeFrom(snap.streams);
  }
  return {
    store,
    started() {
      if (snap !== null) {
        const dropped = pool.unclaimedResumes();
        for (const w of dropped) index.removeWorker(w);
        let blocks = 0;
        for (const n of restored.values()) blocks += n;
        logger.info(
          {
            path,
            savedAtMs: snap.createdAtMs,
            streams: restored.size - dropped.length,
            dropped: dropped.length,
            blocks,
            ms: Math.round(performance.now() - t0),
          },
          "index snapshot restored; streams verify and replay from their saved seq",
        );
      }
      store.start();
    },
  };
}
