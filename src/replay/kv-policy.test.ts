import { describe, expect, it } from "vitest";
import { computeBlockKeys } from "../index/block-key.js";
import { RadixTreeIndex } from "../index/radix-tree.js";
import { DEFAULT_SCHEDULER_CONFIG } from "../scheduler/defaults.js";
import { seededRng } from "../util/rng.js";
import { KvPolicy } from "./kv-policy.js";

describe("KvPolicy", () => {
  it("drops a degraded worker's approximate view when its engine clears its cache", () => {
    const policy = new KvPolicy({
      workers: 2,
      index: new RadixTreeIndex({ blockSize: 4 }),
      capacityBlocks: 100,
      config: DEFAULT_SCHEDULER_CONFIG,
      rng: seededRng(1),
      predict: { ttlMs: 2_000, fallback: true, faults: [], degradedTtlMs: 600_000 },
    });
    const predicted = policy.predict!.predicted;
    const w = policy.keyOf(0);
    const keys = computeBlockKeys(
      Array.from({ length: 32 }, (_, i) => i),
      4,
      null,
    );
    predicted.setDegraded(w, 100);
    predicted.record(w, keys, 0);
    expect(predicted.match(keys, 10).get(w)).toBe(8);
    policy.onKvEvent(0, { type: "cleared" }, 20);
    expect(predicted.match(keys, 30).get(w)).toBeUndefined();
  });
});
