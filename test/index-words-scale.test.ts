/**
 * The words entry points at a scale the small property tests do not reach: long chains
 * (the stored path warms a whole chain's table slots before storing it, the removed path
 * a whole batch's), 64-bit hashes with the high bits set in both words (kept as int32
 * inside the index), many workers sharing prefixes, and tables grown through several
 * incremental migrations. Every event goes to the words path, to the object path
 * (`applyEvent`) and to the brute-force reference model; outcomes, matches of every
 * stored prompt and stats must agree throughout.
 */

import { describe, expect, it } from "vitest";
import { computeBlockKeys } from "../src/index/block-key.js";
import { RadixTreeIndex } from "../src/index/radix-tree.js";
import type { HashWords, RemovedWords, StoredWords, TokenWords } from "../src/index/types.js";
import { engineHashFromU32Pair } from "../src/protocol/engine-hash.js";
import type { KvEvent } from "../src/protocol/events.js";
import { type WorkerKey, workerKey } from "../src/protocol/worker.js";
import { seededRng } from "../src/util/rng.js";
import { ReferenceIndex } from "./index-reference-model.js";

const BS = 4;

describe("words entry points at scale", () => {
  it("agree with applyEvent and the reference model on long chains, high-bit hashes and grown tables", () => {
    const rand = seededRng(20261123);
    const int = (n: number) => Math.floor(rand() * n);
    const words = new RadixTreeIndex({ blockSize: BS, initialCapacity: 16 });
    const objects = new RadixTreeIndex({ blockSize: BS, initialCapacity: 16 });
    const model = new ReferenceIndex(BS);
    const workers: WorkerKey[] = Array.from({ length: 24 }, (_, i) => workerKey(`w${i}`));
    // Shared prefixes: a few prompts of up to 40 blocks; each worker stores a prefix of
    // one, from the root or under the block before (its parent), under its own hashes
    // (engine hashes differ per engine) with high bits set: [0x8000_0000 | w, …].
    const prompts = Array.from({ length: 6 }, () => Array.from({ length: 40 * BS }, () => int(3)));
    const hashOf = (w: number, p: number, i: number): [number, number] => [
      (0x80000000 | (w << 16) | p) >>> 0,
      (0xf0000000 | Math.imul(i + 1, 0x9e3779b1)) >>> 0,
    ];
    /** What each worker stored (per prompt: blocks held from the root, a contiguous run). */
    const held = workers.map(() => new Map<number, number>());
    let checked = 0;

    const apply = (w: number, event: KvEvent, tape: StoredWords | RemovedWords) => {
      const worker = workers[w]!;
      const want = model.apply(worker, event);
      expect(objects.applyEvent(worker, event)).toEqual(want);
      const got =
        event.type === "stored"
          ? words.applyStoredWords(worker, tape as StoredWords)
          : words.applyRemovedWords(worker, tape as RemovedWords);
      expect(got).toEqual(want);
    };

    for (let step = 0; step < 1500; step++) {
      if (step % 100 === 0) {
        for (let q = 0; q < prompts.length; q++) {
          const keys = computeBlockKeys(prompts[q]!, BS, null);
          const want = model.match(prompts[q]!, null);
          expect(objects.findMatches(keys).workers).toEqual(want);
          expect(words.findMatches(keys).workers).toEqual(want);
          checked++;
        }
        expect(words.stats()).toEqual(objects.stats());
      }
      const w = int(workers.length);
      const p = int(prompts.length);
      const have = held[w]!.get(p) ?? 0;
      if (have > 0 && rand() < 0.3) {
        // Remove a tail of what it holds (one batch), plus an unknown hash now and then.
        const from = int(have);
        const ids: number[] = [];
        for (let i = from; i < have; i++) ids.push(i);
        const pairs = ids.map((i) => hashOf(w, p, i));
        if (rand() < 0.2) pairs.push(hashOf(w, p, 1000 + int(100)));
        const hw = new Uint32Array(2 * pairs.length) as HashWords;
        pairs.forEach(([hi, lo], k) => {
          hw[2 * k] = hi;
          hw[2 * k + 1] = lo;
        });
        apply(
          w,
          {
            type: "removed",
            blockHashes: pairs.map(([hi, lo]) => engineHashFromU32Pair(hi, lo)),
            medium: "GPU",
            tier: "gpu",
          },
          { hashes: hw, first: 0, count: pairs.length, tier: "gpu" },
        );
        held[w]!.set(p, from);
        continue;
      }
      // Store the next 1..40 blocks of the prompt under the last one held.
      const n = Math.min(40 - have, 1 + int(40));
      if (n === 0) continue;
      const pairs: [number, number][] = [];
      if (have > 0) pairs.push(hashOf(w, p, have - 1));
      for (let i = have; i < have + n; i++) pairs.push(hashOf(w, p, i));
      const hw = new Uint32Array(2 * pairs.length) as HashWords;
      pairs.forEach(([hi, lo], k) => {
        hw[2 * k] = hi;
        hw[2 * k + 1] = lo;
      });
      const tokens = prompts[p]!.slice(have * BS, (have + n) * BS);
      const blockHashes = pairs.map(([hi, lo]) => engineHashFromU32Pair(hi, lo));
      apply(
        w,
        {
          type: "stored",
          blockHashes: have > 0 ? blockHashes.slice(1) : blockHashes,
          parentHash: have > 0 ? blockHashes[0]! : null,
          tokenIds: tokens,
          blockSize: BS,
          loraId: null,
          loraName: null,
          medium: "GPU",
          tier: "gpu",
        },
        {
          hashes: hw,
          first: have > 0 ? 1 : 0,
          count: n,
          tier: "gpu",
          parentPair: have > 0 ? 0 : -1,
          tokens: Uint32Array.from(tokens) as TokenWords,
          tokenOffset: 0,
          tokenCount: tokens.length,
          blockSize: BS,
          loraName: null,
          loraId: null,
        },
      );
      held[w]!.set(p, have + n);
    }
    // The run grew the tables through several migrations and built deep shared chains.
    const stats = words.stats();
    expect(stats.workerBlocks).toBeGreaterThan(2000);
    expect(stats.outcomes["stored/applied"]).toBeGreaterThan(500);
    expect(stats.outcomes["removed/block_not_found"]).toBeGreaterThan(10);
    expect(checked).toBe(15 * prompts.length);
    for (const prompt of prompts) {
      const keys = computeBlockKeys(prompt, BS, null);
      expect(words.findMatches(keys)).toEqual(objects.findMatches(keys));
    }
    expect(words.stats()).toEqual(objects.stats());
  });
});
