import { describe, expect, it } from "vitest";
import { computeBlockKeys } from "../index/block-key.js";
import { RadixTreeIndex } from "../index/radix-tree.js";
import { LoadTracker } from "../load/load-tracker.js";
import { WorkerRegistry } from "../load/worker-registry.js";
import { engineHashFromSafeInt } from "../protocol/engine-hash.js";
import type { KvEvent } from "../protocol/events.js";
import { workerKey } from "../protocol/worker.js";
import { IndexUpkeepLoop } from "./index-upkeep.js";

const BS = 4;
const stored = (first: number, n: number): KvEvent => ({
  type: "stored",
  blockHashes: Array.from({ length: n }, (_, i) => engineHashFromSafeInt(first + i)),
  parentHash: null,
  tokenIds: Array.from({ length: n * BS }, (_, i) => first * BS + i),
  blockSize: BS,
  loraId: null,
  loraName: null,
  medium: null,
  tier: "gpu",
});

function setup() {
  const index = new RadixTreeIndex({ blockSize: BS });
  const registry = new WorkerRegistry();
  const loads = new LoadTracker({ staleAfterMs: 5000 });
  const spec = { url: "http://127.0.0.1:1", kind: "vllm", blockSize: BS } as const;
  registry.upsert({ ...spec, workerId: "scraped" });
  registry.upsert({ ...spec, workerId: "configured", numGpuBlocks: 20 });
  const snap = { running: 0, waiting: 0, kvUsage: 0, numGpuBlocks: 10, atMs: 0 };
  loads.update(workerKey("scraped"), snap, 0);
  loads.update(workerKey("configured"), snap, 0);
  const upkeep = new IndexUpkeepLoop({ index, registry, loads });
  return { index, registry, loads, upkeep };
}

describe("IndexUpkeepLoop", () => {
  it("gives the index each worker's capacity: configured first, else the engine's", () => {
    const { index, upkeep } = setup();
    upkeep.syncCapacities();
    index.applyEvent(workerKey("scraped"), stored(0, 10));
    index.applyEvent(workerKey("configured"), stored(0, 15));
    expect(index.stats().overflowResets).toBe(0);
    index.applyEvent(workerKey("scraped"), stored(100, 1));
    index.applyEvent(workerKey("configured"), stored(100, 5));
    expect(index.stats().overflowResets).toBe(1);
    index.applyEvent(workerKey("configured"), stored(200, 1));
    expect(index.stats().overflowResets).toBe(2);
  });

  it("a worker leaving the registry loses its bound", () => {
    const { index, registry, upkeep } = setup();
    upkeep.syncCapacities();
    registry.removeWorker("scraped");
    upkeep.syncCapacities();
    index.applyEvent(workerKey("scraped"), stored(0, 50));
    expect(index.stats().overflowResets).toBe(0);
  });

  it("reclaims a cleared worker's memory in slices across event-loop turns", async () => {
    const { index, upkeep } = setup();
    const w = workerKey("big");
    for (let p = 0; p < 100; p++) index.applyEvent(w, stored(p * 1000, 500));
    index.removeWorker(w);
    expect(index.stats().nodes).toBe(50_000);
    let turns = 0;
    const counting = setInterval(() => turns++, 0);
    upkeep.start();
    upkeep.tick();
    while (index.reclaimPending) await new Promise((r) => setImmediate(r));
    clearInterval(counting);
    upkeep.stop();
    expect(index.stats().nodes).toBe(0);
    expect(turns).toBeGreaterThan(0);
    const first = stored(0, 500);
    const keys = computeBlockKeys(first.type === "stored" ? first.tokenIds : [], BS, null);
    expect(index.findMatches(keys).workers).toEqual([]);
  });
});
