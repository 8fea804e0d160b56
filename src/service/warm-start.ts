/**
 * Warm restart at start-up (docs/index.md, "Warm restart"): with `snapshot.path` set, the
 * saved index is restored before any worker is added, and each saved stream resumes from
 * its last applied batch (the engine's copy of that batch is compared first: a restarted
 * engine, or one whose buffer no longer reaches back, is cleared alone). When no local
 * snapshot loads and `snapshot.fromPeer` is set, a peer replica's `GET /v1/snapshot` is
 * fetched and checked exactly as a file, then restored the same way. A refused snapshot
 * leaves the index empty: cold start. Then the store writes periodically (with a path).
 */

import type { KvrouterConfig } from "../config/index.js";
import type { RadixTreeIndex } from "../index/radix-tree.js";
import { type DecodedSnapshot, restoreSnapshot } from "../index/snapshot-codec.js";
import { applySlicer } from "../ingest/apply-slicer.js";
import type { SubscriberPool } from "../ingest/subscriber-pool.js";
import type { WorkerKey } from "../protocol/worker.js";
import type { LogSink } from "../util/log-sink.js";
import { fetchPeerSnapshot } from "./snapshot-peer.js";
import { SnapshotStore } from "./snapshot-store.js";

export interface WarmStart {
  /** Always present: without `snapshot.path` it writes nothing but still serves exports. */
  readonly store: SnapshotStore;
  /** Call once the configured workers are added: clears what no stream resumed, starts writing. */
  started(): void;
}

export async function warmStart(
  config: KvrouterConfig,
  index: RadixTreeIndex,
  pool: SubscriberPool,
  logger: LogSink,
): Promise<WarmStart> {
  const { path, fromPeer } = config.snapshot;
  const access = index.snapshotAccess();
  const store = new SnapshotStore(
    {
      path,
      intervalMs: config.snapshot.intervalMs,
      blockSize: config.index.blockSize,
      logger,
      steps: applySlicer,
    },
    { access, streams: () => pool.saved() },
  );
  const t0 = performance.now();
  let snap: DecodedSnapshot | null = store.load();
  let from: string | null = path;
  if (snap === null && fromPeer !== null) {
    const got = await fetchPeerSnapshot(fromPeer, {
      token: config.server.authToken,
      timeoutMs: config.snapshot.fromPeerTimeoutMs,
    });
    if (got.ok) {
      snap = store.check(got.bytes, "peer", got.url);
      from = got.url;
    } else {
      logger.error(
        { url: got.url, reason: got.reason, detail: got.message },
        "index snapshot from peer unavailable, starting cold",
      );
      store.cold("peer", got.reason === "http_status" ? "peer_http_status" : "peer_unreachable");
    }
  }
  let restored = new Map<WorkerKey, number>();
  if (snap !== null) {
    // Only workers whose stream can be resumed: anything else would be served unverified.
    const resumable = new Set(snap.streams.map((s) => s.worker));
    restored = restoreSnapshot(access, snap, (w) => resumable.has(w));
    pool.resumeFrom(snap.streams);
  }
  const loaded = snap;
  return {
    store,
    started() {
      if (loaded !== null) {
        const dropped = pool.unclaimedResumes();
        for (const w of dropped) index.removeWorker(w);
        let blocks = 0;
        for (const n of restored.values()) blocks += n;
        logger.info(
          {
            source: store.loadResult?.source,
            from,
            savedAtMs: loaded.createdAtMs,
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
