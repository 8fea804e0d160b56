/**
 * Instruments of load sharing between replicas, read from the sync's status at scrape
 * time (`kvrouter_replicas_*`): whether Redis is in step, how many peers and their
 * requests are known, and what was lost or routed without sync while Redis was away.
 */

import { Counter, Gauge, type Registry } from "prom-client";
import type { ReplicaSyncState, ReplicaSyncStatus } from "../replicas/redis-load-sync.js";

const STATES: readonly ReplicaSyncState[] = ["connecting", "synced", "catching_up", "degraded"];

const COUNTERS = [
  ["publishedOps", "published_ops_total", "In-flight changes written to Redis and published"],
  ["droppedOps", "dropped_ops_total", "In-flight changes not sent (Redis away or slow)"],
  ["failedFlushes", "failed_flushes_total", "Redis writes that failed or timed out"],
  ["routesWhileDegraded", "degraded_routes_total", "Routes decided while not in sync"],
  ["resyncs", "resyncs_total", "Full rewrites of this replica's state in Redis"],
  ["peerReloads", "peer_reloads_total", "Full reads of a peer's state from Redis"],
  ["messagesIn", "messages_received_total", "Messages received from the load channel"],
  ["badMessages", "bad_messages_total", "Received messages or entries that did not decode"],
  ["gaps", "sequence_gaps_total", "Peer messages missed (detected by sequence number)"],
  ["droppedPeers", "dropped_peers_total", "Peers dropped after staleAfterMs of silence"],
  ["disconnects", "disconnects_total", "Redis connections lost"],
  ["idConflicts", "id_conflicts_total", "Messages from another process using this replica id"],
] as const;

/** Register the replica instruments on `registry`, reading `status` when scraped. */
export function registerReplicaMetrics(registry: Registry, status: () => ReplicaSyncStatus): void {
  const registers = [registry];
  new Gauge({
    name: "kvrouter_replicas_sync_state",
    help: "1 for the current state of load sharing with the other replicas",
    labelNames: ["state"] as const,
    registers,
    collect() {
      const s = status().state;
      for (const st of STATES) this.set({ state: st }, st === s ? 1 : 0);
    },
  });
  new Gauge({
    name: "kvrouter_replicas_peers",
    help: "Other replicas heard from within replicas.staleAfterMs",
    registers,
    collect() {
      this.set(Object.keys(status().peers).length);
    },
  });
  new Gauge({
    name: "kvrouter_replicas_remote_requests",
    help: "Requests in flight routed by other replicas, as known here",
    registers,
    collect() {
      this.set(status().remoteRequests);
    },
  });
  new Gauge({
    name: "kvrouter_replicas_last_sync_age_seconds",
    help: "Time since the last successful write to Redis (-1 = never)",
    registers,
    collect() {
      const last = status().lastOkMs;
      this.set(last === null ? -1 : (Date.now() - last) / 1000);
    },
  });
  for (const [field, suffix, help] of COUNTERS) {
    new Counter({
      name: `kvrouter_replicas_${suffix}`,
      help,
      registers,
      collect() {
        this.reset();
        this.inc(status()[field]);
      },
    });
  }
}
