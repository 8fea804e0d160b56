import { describe, expect, it } from "vitest";
import {
  type EngineBlockHash,
  engineHashFromBytes,
  engineHashFromSafeInt,
  engineHashFromString,
} from "../protocol/engine-hash.js";
import { type KvEvent, tierOfMedium } from "../protocol/events.js";
import { type WorkerKey, workerKey } from "../protocol/worker.js";
import { computeBlockKeys } from "./block-key.js";
import { RadixTreeIndex } from "./radix-tree.js";
import type { WorkerMatch } from "./types.js";

const BS = 4;
const A = workerKey("a");
const B = workerKey("b");
const h = (n: number): EngineBlockHash => engineHashFromSafeInt(n);
/** Tokens of block i of a test prompt: every block distinct unless asked otherwise. */
const block = (i: number, salt = 0): number[] => [i, i + 1, i + 2, salt];
const tokens = (...blocks: number[][]): number[] => blocks.flat();

function stored(
  hashes: EngineBlockHash[],
  parentHash: EngineBlockHash | null,
  tokenIds: number[],
  opts: {
    medium?: string | null;
    loraName?: string | null;
    loraId?: number | null;
    blockSize?: number;
  } = {},
): KvEvent {
  const medium = opts.medium ?? null;
  return {
    type: "stored",
    blockHashes: hashes,
    parentHash,
    tokenIds,
    blockSize: opts.blockSize ?? BS,
    loraId: opts.loraId ?? null,
    loraName: opts.loraName ?? null,
    medium,
    tier: tierOfMedium(medium),
  };
}
const removed = (hashes: EngineBlockHash[], medium: string | null = null): KvEvent => ({
  type: "removed",
  blockHashes: hashes,
  medium,
  tier: tierOfMedium(medium),
});
const cleared: KvEvent = { type: "cleared" };

function match(
  index: RadixTreeIndex,
  prompt: number[],
  lora: string | null = null,
): Record<string, Omit<WorkerMatch, "worker">> {
  const result = index.findMatches(computeBlockKeys(prompt, BS, lora));
  expect(result.blocks).toBe(Math.floor(prompt.length / BS));
  return Object.fromEntries(result.workers.map(({ worker, ...m }) => [worker, m]));
}
const m = (gpu: number, host: number, disk: number, totalBlocks: number) => ({
  gpu,
  host,
  disk,
  totalBlocks,
});

const P = tokens(block(0), block(10), block(20), block(30));
const NO_BOUNDS = { reclaimPendingBlocks: 0, capEvictions: 0, overflowResets: 0 };

describe("RadixTreeIndex", () => {
  it("indexes a stored sequence and matches its prefix", () => {
    const index = new RadixTreeIndex({ blockSize: BS });
    expect(index.applyEvent(A, stored([h(1), h(2), h(3)], null, P.slice(0, 12)))).toEqual({
      status: "applied",
      unknownHashes: 0,
    });
    expect(match(index, P)).toEqual({ [A]: m(3, 3, 3, 3) });
    expect(match(index, tokens(block(0), block(10), block(99)))).toEqual({ [A]: m(2, 2, 2, 3) });
    expect(match(index, tokens(block(5)))).toEqual({});
    expect(index.workerBlocks(A)).toBe(3);
    expect(index.stats()).toEqual({
      nodes: 3,
      workers: 1,
      workerBlocks: 3,
      outcomes: { "stored/applied": 1 },
      ...NO_BOUNDS,
    });
  });

  it("continues a sequence from a parent hash and shares prefixes across workers", () => {
    const index = new RadixTreeIndex({ blockSize: BS });
    index.applyEvent(B, stored([h(1), h(2)], null, P.slice(0, 8)));
    index.applyEvent(A, stored([h(7)], null, P.slice(0, 4)));
    index.applyEvent(A, stored([h(8), h(9)], h(7), P.slice(4, 12)));
    // Workers come out sorted by key, whatever order they were first seen in.
    expect(index.findMatches(computeBlockKeys(P, BS, null)).workers.map((w) => w.worker)).toEqual([
      A,
      B,
    ]);
    expect(match(index, P)).toEqual({ [A]: m(3, 3, 3, 3), [B]: m(2, 2, 2, 2) });
    expect(index.stats()).toMatchObject({ nodes: 3, workers: 2, workerBlocks: 5 });
  });

  it("keeps LoRA adapters apart even for identical tokens", () => {
    const index = new RadixTreeIndex({ blockSize: BS });
    index.applyEvent(A, stored([h(1), h(2)], null, P.slice(0, 8), { loraName: "sql" }));
    index.applyEvent(B, stored([h(1), h(2)], null, P.slice(0, 8)));
    expect(match(index, P, "sql")).toEqual({ [A]: m(2, 2, 2, 2) });
    expect(index.workerBlocks(B)).toBe(2);
    expect(match(index, P, null)).toEqual({ [B]: m(2, 2, 2, 2) });
    expect(index.workerBlocks(A)).toBe(2);
    expect(match(index, P, "")).toEqual(match(index, P, null));
    // A child stored under a LoRA parent stays in that adapter's tree.
    index.applyEvent(A, stored([h(3)], h(2), P.slice(8, 12)));
    expect(match(index, P, "sql")[A]).toEqual(m(3, 3, 3, 3));
    expect(index.stats().nodes).toBe(5);
  });

  it("keeps blocks of an adapter known only by lora_id (SGLang, old vLLM) off the base model", () => {
    const index = new RadixTreeIndex({ blockSize: BS });
    index.applyEvent(A, stored([h(1)], null, P.slice(0, 4), { loraId: 3 }));
    index.applyEvent(B, stored([h(1)], null, P.slice(0, 4), { loraId: 0 }));
    expect(match(index, P, null)).toEqual({ [B]: m(1, 1, 1, 1) });
    expect(index.workerBlocks(A)).toBe(1);
    expect(match(index, P, "3")).toEqual({});
    expect(index.workerBlocks(A)).toBe(1);
    expect(index.workerBlocks(B)).toBe(1);
    // A name, when sent, decides; the id is then only informative.
    index.applyEvent(A, stored([h(2)], null, P.slice(0, 4), { loraId: 3, loraName: "sql" }));
    expect(match(index, P, "sql")[A]).toEqual(m(1, 1, 1, 2));
  });

  it("rejects an unknown parent, a wrong block size and a wrong token count, applying nothing", () => {
    const index = new RadixTreeIndex({ blockSize: BS });
    expect(index.applyEvent(A, stored([h(2)], h(1), P.slice(0, 4))).status).toBe(
      "parent_not_found",
    );
    // A parent known only to another worker is unknown to this one.
    index.applyEvent(B, stored([h(1)], null, P.slice(0, 4)));
    expect(index.applyEvent(A, stored([h(2)], h(1), P.slice(4, 8))).status).toBe(
      "parent_not_found",
    );
    expect(
      index.applyEvent(A, stored([h(1), h(2)], null, P.slice(0, 4), { blockSize: 2 })).status,
    ).toBe("block_size_mismatch");
    expect(index.applyEvent(A, stored([h(1), h(2)], null, P.slice(0, 6))).status).toBe(
      "invalid_token_count",
    );
    expect(index.applyEvent(A, stored([], null, P.slice(0, 4))).status).toBe("invalid_token_count");
    expect(match(index, P)).toEqual({ [B]: m(1, 1, 1, 1) });
    expect(index.workerBlocks(A)).toBe(0);
    expect(index.stats()).toEqual({
      nodes: 1,
      workers: 2,
      workerBlocks: 1,
      outcomes: {
        "stored/applied": 1,
        "stored/parent_not_found": 2,
        "stored/block_size_mismatch": 1,
        "stored/invalid_token_count": 2,
      },
      ...NO_BOUNDS,
    });
  });

  it("moves blocks between tiers with offload placeholders and per-tier removals", () => {
    const index = new RadixTreeIndex({ blockSize: BS });
    index.applyEvent(A, stored([h(1), h(2), h(3)], null, P.slice(0, 12)));
    // Offload of blocks 2 and 3 to CPU, as vLLM sends it: no tokens, block size 0.
    const offload = stored([h(2), h(3)], null, [], { medium: "CPU", blockSize: 0 });
    expect(index.applyEvent(A, offload).status).toBe("applied");
    expect(index.applyEvent(A, removed([h(2), h(3)], "GPU"))).toEqual({
      status: "applied",
      unknownHashes: 0,
    });
    expect(match(index, P)).toEqual({ [A]: m(1, 3, 3, 3) });
    index.applyEvent(A, stored([h(1)], null, [], { medium: "DISK", blockSize: 0 }));
    index.applyEvent(A, removed([h(1)], "GPU"));
    expect(match(index, P)).toEqual({ [A]: m(0, 0, 3, 3) });
    index.applyEvent(A, removed([h(2)], "CPU_PINNED"));
    expect(match(index, P)).toEqual({ [A]: m(0, 0, 1, 2) });
    expect(index.stats().nodes).toBe(3); // block 2 is unheld but still has a child
  });

  it("counts unknown hashes of placeholders and removals and applies the rest", () => {
    const index = new RadixTreeIndex({ blockSize: BS });
    index.applyEvent(A, stored([h(1), h(2)], null, P.slice(0, 8)));
    const offload = stored([h(9), h(2)], null, [], { medium: "CPU", blockSize: 0 });
    expect(index.applyEvent(A, offload)).toEqual({ status: "block_not_found", unknownHashes: 1 });
    // h(1) is not held on the host tier: that removal is unknown too.
    expect(index.applyEvent(A, removed([h(1), h(8), h(2)], "CPU"))).toEqual({
      status: "block_not_found",
      unknownHashes: 2,
    });
    expect(match(index, P)).toEqual({ [A]: m(2, 2, 2, 2) });
    expect(index.applyEvent(B, removed([h(1)]))).toEqual({
      status: "block_not_found",
      unknownHashes: 1,
    });
    expect(index.stats().outcomes).toEqual({
      "stored/applied": 1,
      "stored/block_not_found": 1,
      "removed/block_not_found": 2,
    });
  });

  it("frees removed nodes, keeping a node while it has children", () => {
    const index = new RadixTreeIndex({ blockSize: BS });
    index.applyEvent(A, stored([h(1), h(2), h(3)], null, P.slice(0, 12)));
    index.applyEvent(B, stored([h(1), h(2)], null, P.slice(0, 8)));
    index.applyEvent(A, removed([h(1), h(2)]));
    expect(index.stats()).toMatchObject({ nodes: 3, workerBlocks: 3 });
    // A holds block 3 only: no contiguous prefix from the root.
    expect(match(index, P)).toEqual({ [B]: m(2, 2, 2, 2) });
    expect(index.workerBlocks(A)).toBe(1);
    index.applyEvent(B, removed([h(2), h(1)]));
    expect(index.stats()).toMatchObject({ nodes: 3, workerBlocks: 1 });
    index.applyEvent(A, removed([h(3)]));
    expect(index.stats()).toMatchObject({ nodes: 0, workerBlocks: 0 });
  });

  it("clears one worker and removes another", () => {
    const index = new RadixTreeIndex({ blockSize: BS });
    index.applyEvent(A, stored([h(1), h(2)], null, P.slice(0, 8)));
    index.applyEvent(A, stored([h(3)], null, block(50)));
    index.applyEvent(B, stored([h(1), h(2), h(3)], null, P.slice(0, 12)));
    expect(index.applyEvent(A, cleared).status).toBe("applied");
    expect(match(index, P)).toEqual({ [B]: m(3, 3, 3, 3) });
    expect(index.workerBlocks(A)).toBe(0);
    // Cleared at once for routing; A's own block 50 is reclaimed later.
    expect(index.stats()).toMatchObject({ nodes: 4, workers: 2, workerBlocks: 3 });
    expect(index.stats().reclaimPendingBlocks).toBe(3);
    while (index.reclaim(1));
    expect(index.stats()).toMatchObject({ nodes: 3, workers: 2, workerBlocks: 3 });
    expect(index.stats().reclaimPendingBlocks).toBe(0);
    // After a clear the worker starts over: its old hashes are unknown.
    expect(index.applyEvent(A, stored([h(4)], h(2), P.slice(8, 12))).status).toBe(
      "parent_not_found",
    );
    index.removeWorker(B);
    index.removeWorker(workerKey("never-seen"));
    expect(match(index, P)).toEqual({});
    expect(index.workerBlocks(A)).toBe(0);
    expect(index.stats()).toMatchObject({ nodes: 3, workers: 1, workerBlocks: 0 });
    expect(index.reclaim()).toBe(false);
    expect(index.stats()).toMatchObject({ nodes: 0, workers: 1, workerBlocks: 0 });
    expect(index.stats().outcomes["cleared/applied"]).toBe(1);
  });

  it("counts copies of a re-stored block: it stays until its last copy is removed", () => {
    // vLLM caches a block computed by two concurrent requests twice, announcing each copy.
    const index = new RadixTreeIndex({ blockSize: BS });
    index.applyEvent(A, stored([h(1), h(2)], null, P.slice(0, 8)));
    index.applyEvent(A, stored([h(2)], h(1), P.slice(4, 8)));
    expect(index.stats()).toMatchObject({ nodes: 2, workerBlocks: 2 });
    index.applyEvent(A, removed([h(2)]));
    expect(match(index, P)).toEqual({ [A]: m(2, 2, 2, 2) });
    expect(index.applyEvent(A, removed([h(2)])).status).toBe("applied");
    expect(match(index, P)).toEqual({ [A]: m(1, 1, 1, 1) });
    expect(index.applyEvent(A, removed([h(2)])).status).toBe("block_not_found");
    // A clear forgets the copies too.
    index.applyEvent(A, stored([h(2)], h(1), P.slice(4, 8)));
    index.applyEvent(A, stored([h(2)], h(1), P.slice(4, 8)));
    index.applyEvent(A, { type: "cleared" });
    index.applyEvent(A, stored([h(1), h(2)], null, P.slice(0, 8)));
    index.applyEvent(A, removed([h(2)]));
    expect(match(index, P)).toEqual({ [A]: m(1, 1, 1, 1) });
  });

  it("moves a hash that names another block", () => {
    const index = new RadixTreeIndex({ blockSize: BS });
    index.applyEvent(A, stored([h(1), h(2)], null, P.slice(0, 8)));
    // h(2) now names another block (under a different parent): the old placement is stale.
    index.applyEvent(A, stored([h(5), h(2)], null, tokens(block(70), block(80))));
    expect(match(index, P)).toEqual({ [A]: m(1, 1, 1, 3) });
    expect(match(index, tokens(block(70), block(80)))).toEqual({ [A]: m(2, 2, 2, 3) });
    expect(index.stats()).toMatchObject({ nodes: 3, workerBlocks: 3 });
    index.applyEvent(A, removed([h(2)]));
    expect(match(index, tokens(block(70), block(80)))).toEqual({ [A]: m(1, 1, 1, 2) });
    expect(index.stats()).toMatchObject({ nodes: 2, workerBlocks: 2 });
  });

  it("re-stores a hash in another tier as the same block held in both tiers", () => {
    const index = new RadixTreeIndex({ blockSize: BS });
    index.applyEvent(A, stored([h(1)], null, P.slice(0, 4), { medium: "CPU" }));
    expect(match(index, P)).toEqual({ [A]: m(0, 1, 1, 1) });
    index.applyEvent(A, stored([h(1)], null, P.slice(0, 4)));
    expect(match(index, P)).toEqual({ [A]: m(1, 1, 1, 1) });
    index.applyEvent(A, removed([h(1)], "CPU"));
    expect(match(index, P)).toEqual({ [A]: m(1, 1, 1, 1) });
  });

  it("refuses a parent hash the worker used for two blocks (unchained engine hashes)", () => {
    // SGLang's `hash(tuple(page_tokens))`: page S has one hash under every prefix. The
    // engine holds X→S and Y→S, then caches C after X→S (parent: S's hash).
    const index = new RadixTreeIndex({ blockSize: BS });
    const [X, Y, Z, S, C] = [block(0), block(10), block(20), block(30), block(40)];
    index.applyEvent(A, stored([h(1)], null, X));
    index.applyEvent(A, stored([h(5)], h(1), S));
    index.applyEvent(A, stored([h(2)], null, Y));
    index.applyEvent(A, stored([h(5)], h(2), S));
    expect(index.applyEvent(A, stored([h(7)], h(5), C))).toEqual({
      status: "parent_ambiguous",
      unknownHashes: 0,
    });
    // Chained from Y→S it would claim Y, S, C; the engine holds only Y, S of that prompt.
    expect(match(index, tokens(Y, S, C))).toEqual({ [A]: m(2, 2, 2, 3) });
    expect(match(index, tokens(X, S, C))).toEqual({ [A]: m(1, 1, 1, 3) });
    // The hash stays ambiguous once its entry goes: the engine may still hold X→S.
    index.applyEvent(A, removed([h(5)]));
    index.applyEvent(A, stored([h(3)], null, Z));
    index.applyEvent(A, stored([h(5)], h(3), S));
    expect(index.applyEvent(A, stored([h(7)], h(5), C)).status).toBe("parent_ambiguous");
    expect(match(index, tokens(Z, S, C))).toEqual({ [A]: m(2, 2, 2, 4) });
    expect(index.stats().outcomes["stored/parent_ambiguous"]).toBe(2);
    // A clear empties the engine's cache: hashes name one block again.
    index.applyEvent(A, cleared);
    index.applyEvent(A, stored([h(1)], null, X));
    index.applyEvent(A, stored([h(5)], h(1), S));
    expect(index.applyEvent(A, stored([h(7)], h(5), C)).status).toBe("applied");
    expect(match(index, tokens(X, S, C))).toEqual({ [A]: m(3, 3, 3, 3) });
  });

  it("holds a block under two engine hashes until both are removed", () => {
    const index = new RadixTreeIndex({ blockSize: BS });
    index.applyEvent(A, stored([h(1)], null, P.slice(0, 4)));
    index.applyEvent(A, stored([h(2)], null, P.slice(0, 4), { medium: "CPU" }));
    index.applyEvent(A, stored([h(3)], null, P.slice(0, 4), { medium: "CPU" }));
    expect(index.stats()).toMatchObject({ nodes: 1, workerBlocks: 1 });
    expect(match(index, P)).toEqual({ [A]: m(1, 1, 1, 1) });
    index.applyEvent(A, removed([h(1)]));
    expect(match(index, P)).toEqual({ [A]: m(0, 1, 1, 1) });
    index.applyEvent(A, removed([h(2)], "CPU"));
    expect(match(index, P)).toEqual({ [A]: m(0, 1, 1, 1) });
    index.applyEvent(A, removed([h(3)], "CPU"));
    expect(match(index, P)).toEqual({});
    expect(index.workerBlocks(A)).toBe(0);
    expect(index.stats()).toMatchObject({ nodes: 0, workerBlocks: 0 });
  });

  it("accepts binary and string engine hashes exactly", () => {
    const index = new RadixTreeIndex({ blockSize: BS });
    const bin = engineHashFromBytes(new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]));
    const str = engineHashFromString("mooncake-key-1");
    const store = workerKey("store:mc");
    index.applyEvent(A, stored([bin], null, P.slice(0, 4)));
    index.applyEvent(store, stored([str], null, P.slice(0, 4), { medium: "DISK" }));
    index.applyEvent(
      store,
      stored([engineHashFromString("k2")], str, P.slice(4, 8), {
        medium: "DISK",
      }),
    );
    expect(match(index, P)).toEqual({ [A]: m(1, 1, 1, 1), [store]: m(0, 0, 2, 2) });
    index.applyEvent(store, removed([str], "DISK"));
    index.applyEvent(A, removed([bin]));
    expect(index.applyEvent(A, removed([bin])).unknownHashes).toBe(1);
    expect(match(index, P)).toEqual({});
    expect(index.workerBlocks(A)).toBe(0);
    expect(index.workerBlocks(store)).toBe(1);
  });

  it("stays consistent through pool growth and many workers", () => {
    const index = new RadixTreeIndex({ blockSize: BS, initialCapacity: 16 });
    const workers: WorkerKey[] = Array.from({ length: 40 }, (_, i) =>
      workerKey(`w${String(i).padStart(2, "0")}`),
    );
    const long = Array.from({ length: 4 * 600 }, (_, i) => i % 97);
    const hashes = (w: number) => Array.from({ length: 600 }, (_, i) => h(w * 10_000 + i));
    for (const [w, key] of workers.entries()) {
      // Worker w holds the first 100 + 10·w blocks of the shared prompt.
      const n = 100 + 10 * w;
      expect(
        index.applyEvent(key, stored(hashes(w).slice(0, n), null, long.slice(0, 4 * n))),
      ).toMatchObject({ status: "applied" });
    }
    const all = match(index, long);
    for (const [w, key] of workers.entries()) {
      const n = 100 + 10 * w;
      expect(all[key]).toEqual(m(n, n, n, n));
    }
    expect(index.stats().nodes).toBe(490);
    for (const [w, key] of workers.entries()) {
      if (w % 2 === 0) index.removeWorker(key);
      else index.applyEvent(key, removed(hashes(w).slice(50, 100)));
    }
    const after = match(index, long);
    expect(Object.keys(after)).toHaveLength(20);
    for (const [w, key] of workers.entries()) {
      if (w % 2 === 1) expect(after[key]).toEqual(m(50, 50, 50, 50 + 10 * w));
    }
    expect(index.stats().nodes).toBe(490);
  });

  it("rejects an invalid block size at construction", () => {
    expect(() => new RadixTreeIndex({ blockSize: 0 })).toThrow(/blockSize/);
  });
});
