/**
 * `findMatches` with many workers: it lists only the workers holding the prompt's first
 * block, in worker-key order, whichever way it orders them (a few slots sorted by rank,
 * a large share picked out of the key order), also after workers leave and join, and a
 * cleared worker's recycled slot starts from zero runs.
 */

import { describe, expect, it } from "vitest";
import { engineHashFromSafeInt } from "../protocol/engine-hash.js";
import type { KvEvent } from "../protocol/events.js";
import { type WorkerKey, workerKey } from "../protocol/worker.js";
import { computeBlockKeys } from "./block-key.js";
import { RadixTreeIndex } from "./radix-tree.js";
import type { WorkerMatch } from "./types.js";

const BS = 2;
/** Block i of prompt p: distinct tokens per (p, i). */
const blockTokens = (p: number, i: number): number[] => [p * 1000 + i, 7];

/** Worker `w` stores the first `n` blocks of prompt `p` in `tier`. */
function store(p: number, n: number, tier: "gpu" | "host" = "gpu"): KvEvent {
  const tokens: number[] = [];
  for (let i = 0; i < n; i++) tokens.push(...blockTokens(p, i));
  return {
    type: "stored",
    blockHashes: Array.from({ length: n }, (_, i) => engineHashFromSafeInt(p * 1000 + i + 1)),
    parentHash: null,
    tokenIds: tokens,
    blockSize: BS,
    loraId: null,
    loraName: null,
    medium: tier === "gpu" ? "GPU" : "CPU",
    tier,
  };
}

function promptKeys(p: number, n: number) {
  const tokens: number[] = [];
  for (let i = 0; i < n; i++) tokens.push(...blockTokens(p, i));
  return computeBlockKeys(tokens, BS, null);
}

/** Keys that do not sort like their slots: registration order is not key order. */
const key = (i: number): WorkerKey => workerKey(`w${(i * 7919) % 1000}`);

/** The expected answer, from what each worker was told to store (one prompt each here). */
function expected(held: Map<WorkerKey, { p: number; n: number; host: boolean }>, p: number) {
  const out: WorkerMatch[] = [];
  for (const [worker, h] of [...held].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    if (h.p !== p) continue;
    out.push({ worker, gpu: h.host ? 0 : h.n, host: h.n, disk: h.n, totalBlocks: h.n });
  }
  return out;
}

describe("findMatches with many workers", () => {
  it("lists only the holders, in key order, along every ordering path", () => {
    const index = new RadixTreeIndex({ blockSize: BS });
    const held = new Map<WorkerKey, { p: number; n: number; host: boolean }>();
    const add = (i: number, p: number, n: number, host = false) => {
      index.applyEvent(key(i), store(p, n, host ? "host" : "gpu"));
      held.set(key(i), { p, n, host });
    };
    // 400 workers: prompt 1 held by 3 of them, prompt 2 by 300, the rest hold prompt 3.
    for (let i = 0; i < 400; i++) {
      if (i % 150 === 7) add(i, 1, 1 + (i % 4), i % 2 === 0);
      else if (i < 303) add(i, 2, 1 + (i % 5), i % 3 === 0);
      else add(i, 3, 2);
    }
    const check = (p: number) => {
      const got = index.findMatches(promptKeys(p, 6));
      expect(got.blocks).toBe(6);
      expect(got.workers).toEqual(expected(held, p));
    };
    // A few holders: sorted by rank.
    check(1);
    // A large share of the fleet: picked out of the key order.
    check(2);
    check(3);
    // Nobody holds it.
    expect(index.findMatches(promptKeys(9, 4)).workers).toEqual([]);
    // Twice in a row gives the same answer (the run counters were reset).
    check(2);
    check(2);
  });

  it("a cleared worker stops matching and its recycled slot starts from zero", () => {
    const index = new RadixTreeIndex({ blockSize: BS });
    for (let i = 0; i < 100; i++) index.applyEvent(key(i), store(1, 3));
    expect(index.findMatches(promptKeys(1, 3)).workers).toHaveLength(100);
    for (let i = 0; i < 50; i++) index.applyEvent(key(i), { type: "cleared" });
    const after = index.findMatches(promptKeys(1, 3)).workers;
    expect(after.map((m) => m.worker).sort()).toEqual(
      Array.from({ length: 50 }, (_, i) => key(i + 50)).sort(),
    );
    while (index.reclaim()) {}
    // New workers reuse the reclaimed slots; they hold one block of another prompt.
    for (let i = 100; i < 150; i++) index.applyEvent(key(i), store(2, 1));
    const two = index.findMatches(promptKeys(2, 3)).workers;
    expect(two).toHaveLength(50);
    for (const m of two) expect(m).toMatchObject({ gpu: 1, host: 1, disk: 1, totalBlocks: 1 });
    expect(index.findMatches(promptKeys(1, 3)).workers).toHaveLength(50);
    // Cleared workers are gone from the answer but come back when they store again.
    index.applyEvent(key(3), store(1, 2));
    const back = index.findMatches(promptKeys(1, 3)).workers;
    expect(back.find((m) => m.worker === key(3))).toEqual({
      worker: key(3),
      gpu: 2,
      host: 2,
      disk: 2,
      totalBlocks: 2,
    });
    const names = back.map((m) => m.worker);
    expect(names).toEqual([...names].sort());
  });
});
