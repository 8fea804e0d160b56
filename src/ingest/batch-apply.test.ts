import { describe, expect, it } from "vitest";
import { computeBlockKeys } from "../index/block-key.js";
import { RadixTreeIndex } from "../index/radix-tree.js";
import type { PrefixIndex } from "../index/types.js";
import { encodeEventBatch } from "../protocol/event-encoder.js";
import type { KvEvent } from "../protocol/events.js";
import { encodeMooncakeBatch } from "../protocol/mooncake-encoder.js";
import type { WorkerKey } from "../protocol/worker.js";
import { applyBatch } from "./batch-apply.js";
import { createStreamDecoder } from "./batch-decoder.js";
import { StreamCounters } from "./stream-state.js";

const BS = 4;
const W = "w0" as WorkerKey;
const stored = (hashes: bigint[], parent: bigint | null, tokens: number[]) =>
  encodeEventBatch({
    ts: 1,
    dpRank: null,
    events: [
      {
        type: "BlockStored",
        blockHashes: hashes,
        parentHash: parent,
        tokenIds: tokens,
        blockSize: BS,
        loraId: null,
        medium: "GPU",
        loraName: null,
      },
    ],
  });

/** The real index, except that the next stored event throws after it was applied. */
function failingIndex(real: RadixTreeIndex): { index: PrefixIndex; failNext: () => void } {
  let fail = false;
  const index = new Proxy(real, {
    get(target, prop) {
      if (prop === "applyEvent") {
        return (worker: WorkerKey, event: KvEvent) => {
          const r = target.applyEvent(worker, event);
          if (fail && event.type === "stored") {
            fail = false;
            throw new Error("invariant broken mid-batch");
          }
          return r;
        };
      }
      const v = Reflect.get(target, prop, target);
      return typeof v === "function" ? v.bind(target) : v;
    },
  }) as PrefixIndex;
  return {
    index,
    failNext: () => {
      fail = true;
    },
  };
}

describe("applyBatch", () => {
  it("resets a stateful decoder with the clear: a Mooncake store's blocks come back when announced again", () => {
    const real = new RadixTreeIndex({ blockSize: 16, initialCapacity: 4 });
    const { index, failNext } = failingIndex(real);
    const toks = (s: number) => Array.from({ length: 16 }, (_, i) => s + i);
    const store = (key: string, s: number) =>
      encodeMooncakeBatch({
        ts: 1,
        events: [
          {
            type: "BlockStoreEvent",
            key,
            replicas: [["MEMORY", "h:1"]],
            blockSize: 16,
            tokenIds: toks(s),
          },
        ],
      });
    const t = {
      worker: W,
      dpRank: 0,
      index,
      decoder: createStreamDecoder("mooncake"),
      counters: new StreamCounters(),
      problem: () => {},
    };
    const held = (s: number) =>
      real.findMatches(computeBlockKeys(toks(s), 16, null)).workers.find((m) => m.worker === W)
        ?.disk ?? 0;
    applyBatch(t, 0n, store("k1", 100), null);
    expect(held(100)).toBe(1);
    failNext();
    applyBatch(t, 1n, store("k2", 200), null);
    expect(held(100)).toBe(0);
    // The store announces both again: they are indexed again.
    applyBatch(t, 2n, store("k1", 100), null);
    applyBatch(t, 3n, store("k2", 200), null);
    expect([held(100), held(200)]).toEqual([1, 1]);
  });

  it("clears the worker when the index fails part-way through a batch, so nothing stale is served", () => {
    const real = new RadixTreeIndex({ blockSize: BS, initialCapacity: 4 });
    const { index, failNext } = failingIndex(real);
    const problems: string[] = [];
    const t = {
      worker: W,
      dpRank: 0,
      index,
      decoder: createStreamDecoder("vllm"),
      counters: new StreamCounters(),
      problem: (_d: Record<string, unknown>, msg: string) => problems.push(msg),
    };
    const first = [1, 2, 3, 4, 5, 6, 7, 8];
    applyBatch(t, 0n, stored([11n, 12n], null, first), null);
    const keys = computeBlockKeys(first, BS, null);
    expect(real.findMatches(keys).workers.find((m) => m.worker === W)?.gpu).toBe(2);

    failNext();
    applyBatch(t, 1n, stored([13n], 12n, [9, 10, 11, 12]), null);
    expect(t.counters.applyErrors).toBe(1);
    expect(problems.at(-1)).toMatch(/cleared/);
    // Neither the blocks from before nor the half-applied one are claimed any more.
    const all = computeBlockKeys([...first, 9, 10, 11, 12], BS, null);
    expect(real.findMatches(all).workers.find((m) => m.worker === W)?.gpu ?? 0).toBe(0);
  });
});
