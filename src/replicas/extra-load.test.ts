/**
 * The router adds the other replicas' requests (the book) to its own in-flight load,
 * through the same combining rule: no Redis here, only the hook.
 */

import { describe, expect, it } from "vitest";
import { RadixTreeIndex } from "../index/radix-tree.js";
import { InFlightTracker } from "../load/in-flight.js";
import { LoadTracker } from "../load/load-tracker.js";
import { WorkerRegistry } from "../load/worker-registry.js";
import { workerKey } from "../protocol/worker.js";
import { Router } from "../router.js";
import { DEFAULT_SCHEDULER_CONFIG } from "../scheduler/defaults.js";
import { RemoteLoadBook } from "./remote-load-book.js";

function setup(book: RemoteLoadBook | null) {
  const registry = new WorkerRegistry();
  const loads = new LoadTracker({ staleAfterMs: 10_000 });
  for (const id of ["w0", "w1"]) {
    const w = registry.upsert({ workerId: id, url: `http://${id}`, kind: "vllm", blockSize: 16 });
    loads.update(w.key, { running: 0, waiting: 0, kvUsage: 0.1, atMs: 1000 }, 1000);
  }
  return new Router({
    index: new RadixTreeIndex({ blockSize: 16 }),
    registry,
    loads,
    inFlight: new InFlightTracker({ prefillTtlMs: 60_000, ttlMs: 600_000 }),
    config: DEFAULT_SCHEDULER_CONFIG,
    rng: () => 0,
    ...(book === null ? {} : { extraLoad: book }),
  });
}

const prompt = Array.from({ length: 256 }, (_, i) => i);
const W0 = workerKey("w0");

describe("router with another replica's load", () => {
  it("counts a peer's request routed after the snapshot like its own", () => {
    const book = new RemoteLoadBook({ staleAfterMs: 3000 });
    book.add(
      "b",
      {
        id: "peer-1",
        worker: W0,
        prefillTokens: 4096,
        blocks: 256,
        addedMs: 1500,
        prefillEndMs: 61_500,
        expiresMs: 601_500,
        pending: true,
      },
      1500,
    );
    const withPeer = setup(book).route({ tokenIds: prompt }, 2000);
    const alone = setup(null).route({ tokenIds: prompt }, 2000);
    if (!withPeer.ok || !alone.ok) throw new Error("route failed");
    const c0 = withPeer.decision.candidates.find((c) => c.worker === W0)!;
    expect(c0.load.pendingPrefillTokens).toBe(4096);
    expect(c0.load.waiting).toBe(1); // routed after the snapshot: still queued as far as we know
    expect(withPeer.decision.worker).toBe(workerKey("w1"));
    expect(alone.decision.worker).toBe(W0); // the tie goes to w0 without the peer's load
  });
});
