/**
 * Shared helpers of the ZeroMQ integration tests: polling instead of sleeping, free
 * consecutive TCP ports for data-parallel layouts, batch builders, and an index that
 * records exactly which events each worker received, in which order.
 */

import { createServer } from "node:net";
import type {
  ApplyResult,
  BlockKeySeq,
  IndexStats,
  MatchResult,
  PrefixIndex,
} from "../src/index/types.js";
import type { LiveSocketOptions } from "../src/ingest/decode-thread.js";
import { KvEventSubscriber } from "../src/ingest/kv-event-subscriber.js";
import type {
  KvEventSubscriberDeps,
  KvEventSubscriberOptions,
} from "../src/ingest/subscriber-options.js";
import type { WireBatch } from "../src/protocol/event-encoder.js";
import type { KvEvent } from "../src/protocol/events.js";
import { type WorkerKey, workerKey } from "../src/protocol/worker.js";

/** Poll `check` until it returns true; fails with `what` after `timeoutMs`. */
export async function waitFor(
  what: string,
  check: () => boolean,
  timeoutMs = 15_000,
  intervalMs = 5,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/** A base port P such that P .. P+count-1 are free on 127.0.0.1 right now. */
export async function freePortRange(count: number): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = await new Promise<number>((resolve, reject) => {
      const server = createServer();
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => {
        const address = server.address();
        server.close(() => resolve(typeof address === "object" && address ? address.port : 0));
      });
    });
    if (base === 0 || base + count > 65535) continue;
    let ok = true;
    for (let p = base + 1; p < base + count && ok; p++) ok = await portFree(p);
    if (ok) return base;
  }
  throw new Error(`no ${count} consecutive free ports found`);
}

/** A batch with one BlockStored event per chain: `hashes` chained from `parent`. */
export function storedBatch(hashes: readonly bigint[], parent: bigint | null = null): WireBatch {
  return {
    ts: 1_789_095_808.5,
    dpRank: null,
    events: [
      {
        type: "BlockStored",
        blockHashes: hashes,
        parentHash: parent,
        tokenIds: Array.from(
          { length: hashes.length * 16 },
          (_, i) => Number(hashes[0]!) * 100 + i,
        ),
        blockSize: 16,
        loraId: null,
        medium: "GPU",
        loraName: null,
      },
    ],
  };
}

/** A batch that stores nothing (used to probe whether the live stream gets through). */
export function emptyBatch(): WireBatch {
  return { ts: 1_789_095_808.5, dpRank: null, events: [] };
}

/** 16 hex digits of an engine hash, as the codec normalises integers. */
export function hex(n: bigint): string {
  return BigInt.asUintN(64, n).toString(16).padStart(16, "0");
}

/**
 * A `PrefixIndex` that records, per worker, the engine hashes of applied stored events
 * in arrival order (cleared by `removeWorker`), so tests can check ordering, duplicates
 * and resets exactly.
 */
export class RecordingIndex implements PrefixIndex {
  readonly blockSize = 16;
  readonly held = new Map<string, string[]>();
  readonly removals = new Map<string, number>();

  applyEvent(worker: WorkerKey, event: KvEvent): ApplyResult {
    const list = this.held.get(worker) ?? [];
    this.held.set(worker, list);
    switch (event.type) {
      case "stored":
        list.push(...event.blockHashes);
        break;
      case "removed":
        for (const h of event.blockHashes) {
          const i = list.indexOf(h);
          if (i >= 0) list.splice(i, 1);
        }
        break;
      case "cleared":
        list.length = 0;
        break;
    }
    return { status: "applied", unknownHashes: 0 };
  }

  removeWorker(worker: WorkerKey): void {
    this.held.delete(worker);
    this.removals.set(worker, (this.removals.get(worker) ?? 0) + 1);
  }

  /** Hashes held by `worker`, as hex (see `hex`). */
  of(worker: string): string[] {
    return this.held.get(worker) ?? [];
  }

  findMatches(_keys: BlockKeySeq): MatchResult {
    return { blocks: 0, workers: [] };
  }

  stats(): IndexStats {
    let workerBlocks = 0;
    for (const list of this.held.values()) workerBlocks += list.length;
    return {
      nodes: 0,
      workers: this.held.size,
      workerBlocks,
      outcomes: {},
      reclaimPendingBlocks: 0,
      capEvictions: 0,
      overflowResets: 0,
    };
  }
}

/** Decode-thread socket options for a test stream: no topic, fast reconnects, vLLM order. */
export function liveSocket(endpoint: string): LiveSocketOptions {
  return {
    endpoint,
    topic: "",
    receiveHighWaterMark: 1000,
    reconnectInterval: 20,
    reconnectMaxInterval: 100,
    heartbeatInterval: 0,
    fieldOrder: "vllm",
  };
}

/**
 * A subscriber of worker `w1#0`'s vLLM stream (topic `kv-events`) with a replay endpoint
 * and short test timings; `extra` overrides any option. The caller closes it.
 */
export function replayTestSubscriber(
  index: PrefixIndex,
  endpoint: string,
  replayEndpoint: string,
  extra: Partial<KvEventSubscriberOptions> = {},
  deps: KvEventSubscriberDeps = {},
): KvEventSubscriber {
  return new KvEventSubscriber(
    {
      worker: workerKey("w1", 0),
      endpoint,
      replayEndpoint,
      topic: "kv-events",
      format: "vllm",
      // A stall is found by this silence. A scripted replay answering from the test's own
      // process can also fall silent this long when a loaded machine stops the process for
      // a moment (seen at load ~7 with 150 ms), and exact request counts then differ.
      replayTimeoutMs: 400,
      replayBackoffMs: 10,
      reconnectIntervalMs: 20,
      reconnectMaxIntervalMs: 100,
      ...extra,
    },
    index,
    deps,
  );
}
