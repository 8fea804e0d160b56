/**
 * Wiring of load sharing between replicas from the `replicas` config section: the
 * tracker that reports local changes, the book of peers' requests the router adds to
 * its load, and the Redis sync between them. `null` when the section is off.
 */

import { hostname } from "node:os";
import type { KvrouterConfig } from "../config/types.js";
import type { LogSink } from "../util/log-sink.js";
import { RedisLoadSync } from "./redis-load-sync.js";
import { RemoteLoadBook } from "./remote-load-book.js";
import { SharedInFlightTracker } from "./shared-in-flight.js";

export interface ReplicaSharing {
  readonly inFlight: SharedInFlightTracker;
  readonly book: RemoteLoadBook;
  readonly sync: RedisLoadSync;
}

export function createReplicaSharing(
  config: KvrouterConfig,
  deps: { readonly nowMs: () => number; readonly logger: LogSink },
): ReplicaSharing | null {
  const r = config.replicas;
  if (r.redisUrl === null) return null;
  const book = new RemoteLoadBook({ staleAfterMs: r.staleAfterMs });
  const sync = new RedisLoadSync({
    url: r.redisUrl,
    replicaId: r.id ?? `${hostname()}-${process.pid}`,
    keyPrefix: r.keyPrefix,
    heartbeatMs: r.heartbeatMs,
    staleAfterMs: r.staleAfterMs,
    commandTimeoutMs: r.commandTimeoutMs,
    maxPendingFlushes: r.maxPendingFlushes,
    shareKeys: r.shareKeys,
    book,
    nowMs: deps.nowMs,
    logger: deps.logger,
  });
  return { inFlight: new SharedInFlightTracker(config.inFlight, sync), book, sync };
}
