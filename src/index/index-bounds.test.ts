import { describe, expect, it } from "vitest";
import { type EngineBlockHash, engineHashFromSafeInt } from "../protocol/engine-hash.js";
import { type KvEvent, tierOfMedium } from "../protocol/events.js";
import { type WorkerKey, workerKey } from "../protocol/worker.js";
import { computeBlockKeys } from "./block-key.js";
import { RadixTreeIndex } from "./radix-tree.js";

const BS = 4;
const A = workerKey("a");
const B = workerKey("b");
const h = (n: number): EngineBlockHash => engineHashFromSafeInt(n);

/** Prompt `p` of `n` blocks: distinct across prompts. */
const prompt = (p: number, n: number): number[] =>
  Array.from({ length: n * BS }, (_, i) => p * 100_000 + i);

function stored(first: number, n: number, p: number, medium: string | null = null): KvEvent {
  return {
    type: "stored",
    blockHashes: Array.from({ length: n }, (_, i) => h(first + i)),
    parentHash: null,
    tokenIds: prompt(p, n),
    blockSize: BS,
    loraId: null,
    loraName: null,
    medium,
    tier: tierOfMedium(medium),
  };
}

function held(index: RadixTreeIndex, worker: WorkerKey, p: number, n: number): number {
  const r = index.findMatches(computeBlockKeys(prompt(p, n), BS, null));
  return r.workers.find((m) => m.worker === worker)?.disk ?? 0;
}

describe("RadixTreeIndex clears in O(1) and reclaims in slices", () => {
  it("removeWorker frees nothing synchronously; reclaim frees a bounded amount per call", () => {
    const index = new RadixTreeIndex({ blockSize: BS });
    for (let p = 0; p < 200; p++) index.applyEvent(A, stored(p * 100, 100, p));
    index.applyEvent(B, stored(1_000_000, 100, 0));
    expect(index.stats()).toMatchObject({ nodes: 20_000, workerBlocks: 20_100 });
    index.removeWorker(A);
    // Routing sees the clear at once…
    expect(held(index, A, 0, 100)).toBe(0);
    expect(held(index, B, 0, 100)).toBe(100);
    // …while no entry was touched yet.
    expect(index.stats()).toMatchObject({
      nodes: 20_000,
      workerBlocks: 100,
      reclaimPendingBlocks: 20_000,
    });
    let calls = 0;
    let nodes = 20_000;
    while (index.reclaim(4096)) {
      calls++;
      const now = index.stats().nodes;
      // 4 units per node freed; the last drop may free its whole chain (100 nodes).
      expect(nodes - now).toBeLessThanOrEqual(4096 / 4 + 100);
      nodes = now;
    }
    expect(calls).toBeGreaterThan(50);
    expect(index.stats()).toMatchObject({ nodes: 100, workerBlocks: 100, reclaimPendingBlocks: 0 });
    expect(held(index, B, 0, 100)).toBe(100);
  });

  it("a cleared worker's new blocks match at once, its old ones never, mid-reclaim", () => {
    const index = new RadixTreeIndex({ blockSize: BS });
    for (let p = 0; p < 50; p++) index.applyEvent(A, stored(p * 100, 100, p));
    index.applyEvent(A, { type: "cleared" });
    // The engine re-stores prompt 7 with the same hashes after its reset.
    index.applyEvent(A, stored(700, 100, 7));
    index.reclaim(1000);
    expect(index.reclaimPending).toBe(true);
    expect(held(index, A, 7, 100)).toBe(100);
    expect(held(index, A, 8, 100)).toBe(0);
    // Old hashes are unknown to the new incarnation; its own removals apply.
    expect(
      index.applyEvent(A, { type: "removed", blockHashes: [h(800)], medium: null, tier: "gpu" }),
    ).toMatchObject({ status: "block_not_found" });
    index.applyEvent(A, { type: "removed", blockHashes: [h(750)], medium: null, tier: "gpu" });
    expect(held(index, A, 7, 100)).toBe(50);
    while (index.reclaim(1000));
    expect(held(index, A, 7, 100)).toBe(50);
    expect(index.stats()).toMatchObject({ nodes: 100, workerBlocks: 99 });
  });
});

describe("RadixTreeIndex bounds", () => {
  it("a flood of stored blocks with no removals plateaus at the global cap, oldest out", () => {
    const cap = 5_000;
    const index = new RadixTreeIndex({ blockSize: BS, maxBlocks: cap });
    let most = 0;
    for (let p = 0; p < 1_000; p++) {
      index.applyEvent(p % 2 === 0 ? A : B, stored(p * 100, 50, p));
      const s = index.stats();
      most = Math.max(most, s.workerBlocks);
      expect(s.nodes).toBeLessThanOrEqual(cap);
    }
    expect(most).toBe(cap);
    const s = index.stats();
    expect(s).toMatchObject({ workerBlocks: cap, capEvictions: 50_000 - cap });
    expect(held(index, B, 999, 50)).toBe(50);
    expect(held(index, A, 998, 50)).toBe(50);
    expect(held(index, A, 0, 50)).toBe(0);
    expect(held(index, A, 1000 - cap / 50, 50)).toBe(50);
    expect(held(index, B, 1000 - cap / 50 - 1, 50)).toBe(0);
  });

  it("a re-stored block counts as recent", () => {
    const index = new RadixTreeIndex({ blockSize: BS, maxBlocks: 100 });
    index.applyEvent(A, stored(0, 50, 0));
    index.applyEvent(A, stored(100, 50, 1));
    index.applyEvent(A, stored(0, 50, 0)); // prompt 0 used again
    index.applyEvent(A, stored(200, 50, 2));
    expect(held(index, A, 0, 50)).toBe(50);
    expect(held(index, A, 1, 50)).toBe(0);
    expect(held(index, A, 2, 50)).toBe(50);
  });

  it("a worker holding more GPU blocks than its engine has is reset and counted", () => {
    const index = new RadixTreeIndex({ blockSize: BS });
    index.setWorkerCapacity(A, 100);
    index.applyEvent(A, stored(0, 60, 0));
    index.applyEvent(A, stored(1000, 40, 1));
    index.applyEvent(A, stored(2000, 50, 2, "CPU")); // host tier: not bounded by GPU blocks
    expect(index.stats().overflowResets).toBe(0);
    expect(held(index, A, 1, 40)).toBe(40);
    index.applyEvent(A, stored(3000, 1, 3)); // one GPU block too many: removals were lost
    expect(index.stats()).toMatchObject({ overflowResets: 1, workerBlocks: 0, workers: 1 });
    expect(held(index, A, 0, 60)).toBe(0);
    expect(held(index, A, 2, 50)).toBe(0);
    // The capacity stays with the worker after its reset.
    index.applyEvent(A, stored(0, 100, 0));
    expect(index.stats().overflowResets).toBe(1);
    index.applyEvent(A, stored(5000, 1, 5));
    expect(index.stats().overflowResets).toBe(2);
  });

  it("learning a capacity below what a worker holds resets it; null lifts the bound", () => {
    const index = new RadixTreeIndex({ blockSize: BS });
    index.applyEvent(A, stored(0, 60, 0));
    index.applyEvent(B, stored(1000, 60, 0));
    index.setWorkerCapacity(A, 50);
    index.setWorkerCapacity(B, 60);
    expect(index.stats().overflowResets).toBe(1);
    expect(held(index, A, 0, 60)).toBe(0);
    expect(held(index, B, 0, 60)).toBe(60);
    index.setWorkerCapacity(B, null);
    index.applyEvent(B, stored(2000, 60, 1));
    expect(index.stats().overflowResets).toBe(1);
    expect(() => index.setWorkerCapacity(A, 0)).toThrow(/gpuBlocks/);
    expect(() => new RadixTreeIndex({ blockSize: BS, maxBlocks: -1 })).toThrow(/maxBlocks/);
  });
});
