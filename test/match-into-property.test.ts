/**
 * Property test for `matchInto` (the per-worker answer without objects) and the
 * `findMatches` built on it, with many workers on the same blocks, so that holder lists
 * are long (sorted insertion and removal, binary search between levels), chains have
 * gaps (a block removed in the middle), tiers differ per level, and cleared workers
 * wait for reclamation (their words still in the lists). After every step, for every
 * prompt of the small tree, the decoded `matchInto` answer and `findMatches` must both
 * equal the brute-force `ReferenceIndex`.
 */

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { computeBlockKeys } from "../src/index/block-key.js";
import { MatchBuffer } from "../src/index/match-buffer.js";
import { RadixTreeIndex } from "../src/index/radix-tree.js";
import type { WorkerMatch } from "../src/index/types.js";
import { engineHashFromU32Pair } from "../src/protocol/engine-hash.js";
import { type KvEvent, tierOfMedium } from "../src/protocol/events.js";
import { type WorkerKey, workerKey } from "../src/protocol/worker.js";
import { ReferenceIndex } from "./index-reference-model.js";

const BS = 1;
const DEPTH = 4;
/** Keys deliberately not in slot order (slots follow first sight). */
const WORKERS: WorkerKey[] = Array.from({ length: 24 }, (_, i) =>
  workerKey(`w${String((i * 7) % 24).padStart(2, "0")}`),
);
const MEDIUMS = ["GPU", "CPU", "DISK"] as const;

/** Prompt = a path of tokens in {0, 1}; block i's hash names the path up to i. */
const hashOf = (tokens: readonly number[], i: number) => {
  let id = 1;
  for (let k = 0; k <= i; k++) id = id * 2 + tokens[k]!;
  return engineHashFromU32Pair(0, id);
};

type Command =
  | { kind: "store"; w: number; tokens: number[]; from: number; medium: number }
  | { kind: "remove"; w: number; tokens: number[]; at: number; medium: number }
  | { kind: "clear"; w: number }
  | { kind: "reclaim"; budget: number };

// Half the commands from four workers (chains built, then broken), half from any.
const w = fc.oneof(fc.nat(3), fc.nat(WORKERS.length - 1));
// Mostly the same few paths and mediums: long shared holder lists, and a removal often
// hits a block the worker holds in that tier (a gap mid-chain, a tier lost).
const path = fc.array(fc.constantFrom(0, 0, 0, 1), { minLength: DEPTH, maxLength: DEPTH });
const medium = fc.constantFrom(0, 0, 1, 2);
const command: fc.Arbitrary<Command> = fc.oneof(
  {
    weight: 8,
    arbitrary: fc
      .record({ w, tokens: path, from: fc.constantFrom(0, 0, 1, 2, 3), medium })
      .map((r): Command => ({ kind: "store", ...r })),
  },
  {
    weight: 3,
    arbitrary: fc
      .record({ w, tokens: path, at: fc.nat(DEPTH - 1), medium })
      .map((r): Command => ({ kind: "remove", ...r })),
  },
  { weight: 1, arbitrary: w.map((w): Command => ({ kind: "clear", w })) },
  {
    weight: 1,
    arbitrary: fc.nat(30).map((budget): Command => ({ kind: "reclaim", budget })),
  },
);

function eventOf(c: Command): KvEvent | null {
  if (c.kind === "store") {
    // Blocks [from, DEPTH) under the block before `from` (unknown parents are refused
    // alike by both sides).
    const medium = MEDIUMS[c.medium]!;
    return {
      type: "stored",
      blockHashes: Array.from({ length: DEPTH - c.from }, (_, k) => hashOf(c.tokens, c.from + k)),
      parentHash: c.from === 0 ? null : hashOf(c.tokens, c.from - 1),
      tokenIds: c.tokens.slice(c.from),
      blockSize: BS,
      loraId: null,
      loraName: null,
      medium,
      tier: tierOfMedium(medium),
    };
  }
  if (c.kind === "remove") {
    const medium = MEDIUMS[c.medium]!;
    return {
      type: "removed",
      blockHashes: [hashOf(c.tokens, c.at)],
      medium,
      tier: tierOfMedium(medium),
    };
  }
  if (c.kind === "clear") return { type: "cleared" };
  return null;
}

/** `matchInto`'s answer read back as `findMatches` would give it. */
function decode(index: RadixTreeIndex, buf: MatchBuffer): WorkerMatch[] {
  const out: WorkerMatch[] = [];
  let j = 0;
  const at = buf.firstAt;
  for (let k = 0; k < buf.count; k++) {
    const x = buf.first[at + k]!;
    const s = x >>> 4;
    if (k > 0) expect(buf.first[at + k - 1]! >>> 4).toBeLessThan(s);
    while (j < buf.deepCount && buf.deepSlot[j]! < s) j++;
    const deep = j < buf.deepCount && buf.deepSlot[j] === s;
    out.push({
      worker: index.slotKey(s),
      gpu: deep ? buf.deepGpu[j]! : x & 1,
      host: deep ? buf.deepHost[j]! : (x & 3) !== 0 ? 1 : 0,
      disk: deep ? buf.deepDisk[j]! : 1,
      totalBlocks: index.slotBlocks(s),
    });
  }
  // Every deep entry belongs to a first-block holder.
  for (let d = 0; d < buf.deepCount; d++) {
    expect(out.some((m) => m.worker === index.slotKey(buf.deepSlot[d]!))).toBe(true);
  }
  return out.sort((a, b) => (a.worker < b.worker ? -1 : a.worker > b.worker ? 1 : 0));
}

const PROMPTS: number[][] = Array.from({ length: 1 << DEPTH }, (_, bits) =>
  Array.from({ length: DEPTH }, (_, i) => (bits >> i) & 1),
);

describe("matchInto with many workers", () => {
  it("agrees with the brute-force model and with findMatches after every step", () => {
    fc.assert(
      fc.property(fc.array(command, { minLength: 1, maxLength: 80, size: "large" }), (commands) => {
        const index = new RadixTreeIndex({ blockSize: BS });
        const model = new ReferenceIndex(BS);
        const buf = new MatchBuffer();
        for (const [step, c] of commands.entries()) {
          if (c.kind === "reclaim") index.reclaim(c.budget);
          else {
            const ev = eventOf(c)!;
            expect(index.applyEvent(WORKERS[c.w]!, ev)).toEqual(model.apply(WORKERS[c.w]!, ev));
          }
          for (const tokens of PROMPTS) {
            // Whole prompts every step; their prefixes every fourth step (cost).
            for (const len of step % 4 === 0 ? [1, 2, DEPTH] : [DEPTH]) {
              const t = tokens.slice(0, len);
              const keys = computeBlockKeys(t, BS, null);
              const want = model.match(t, null);
              expect(decode(index, index.matchInto(keys, buf))).toEqual(want);
              expect(index.findMatches(keys).workers).toEqual(want);
            }
          }
        }
      }),
      { numRuns: 50 },
    );
  });
});
