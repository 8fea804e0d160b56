/**
 * Property test: random interleavings of stored / removed / cleared events (and worker
 * removals) from several workers must leave `RadixTreeIndex` agreeing with the
 * brute-force `ReferenceIndex` on `findMatches` for every indexed prefix, and on `stats`.
 * A tiny vocabulary and block size make prefixes collide; a small pool of engine hashes
 * makes parents known or unknown, re-stores, aliases and unknown removals frequent.
 *
 * Clears are O(1) and memory is reclaimed in slices: reclaim steps of random budgets
 * are interleaved, and matches must agree at every step, reclaimed or not. With the
 * caps on (global and per worker), the index may know less than the model, never more.
 */

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { computeBlockKeys } from "../src/index/block-key.js";
import { RadixTreeIndex } from "../src/index/radix-tree.js";
import {
  type EngineBlockHash,
  engineHashFromBytes,
  engineHashFromString,
  engineHashFromU32Pair,
} from "../src/protocol/engine-hash.js";
import { type KvEvent, tierOfMedium } from "../src/protocol/events.js";
import { type WorkerKey, workerKey } from "../src/protocol/worker.js";
import { ReferenceIndex } from "./index-reference-model.js";

const BS = 2;
const WORKERS: WorkerKey[] = [workerKey("w-b"), workerKey("w-a"), workerKey("store:mc")];
const HASHES: EngineBlockHash[] = [
  engineHashFromU32Pair(0, 1),
  engineHashFromU32Pair(0, 2),
  engineHashFromU32Pair(0, 3),
  engineHashFromU32Pair(0xffffffff, 0xfffffffe),
  engineHashFromU32Pair(0x80000000, 0),
  engineHashFromU32Pair(0xdab89baa, 0x7b5857c0),
  engineHashFromU32Pair(1, 0),
  engineHashFromBytes(new Uint8Array([0xab, 0xcd])),
  engineHashFromString("mc-1"),
];
const MEDIUMS = [null, "GPU", "CPU", "DISK"] as const;
const LORAS = [null, "", "sql"] as const;

type Command =
  | { kind: "event"; w: number; event: KvEvent }
  | { kind: "removeWorker"; w: number }
  /** Re-send a stored event seen `back` stored events ago (vLLM's duplicate copies). */
  | { kind: "repeat"; back: number }
  /** Reclaim cleared workers' memory with this budget. */
  | { kind: "reclaim"; budget: number };

const worker = fc.nat(WORKERS.length - 1);
const hash = fc.constantFrom(...HASHES);
const medium = fc.constantFrom(...MEDIUMS);

const storedCmd = fc
  .record({
    w: worker,
    n: fc.integer({ min: 1, max: 3 }),
    parent: fc.option(hash, { freq: 2 }),
    lora: fc.constantFrom(...LORAS),
    loraId: fc.constantFrom(null, null, 0, 7),
    medium,
    hashes: fc.array(hash, { minLength: 3, maxLength: 3 }),
    tokens: fc.array(fc.nat(1), { minLength: 3 * BS, maxLength: 3 * BS }),
    damage: fc.constantFrom("none", "none", "none", "none", "blockSize", "tokenCount"),
  })
  .map(({ w, n, parent, lora, loraId, medium, hashes, tokens, damage }): Command => {
    const tokenIds = tokens.slice(0, damage === "tokenCount" ? n * BS - 1 : n * BS);
    return {
      kind: "event",
      w,
      event: {
        type: "stored",
        blockHashes: hashes.slice(0, n),
        parentHash: parent,
        tokenIds,
        blockSize: damage === "blockSize" ? BS + 1 : BS,
        loraId,
        loraName: lora,
        medium,
        tier: tierOfMedium(medium),
      },
    };
  });

const offloadCmd = fc
  .record({ w: worker, hashes: fc.array(hash, { minLength: 1, maxLength: 3 }), medium })
  .map(
    ({ w, hashes, medium }): Command => ({
      kind: "event",
      w,
      event: {
        type: "stored",
        blockHashes: hashes,
        parentHash: null,
        tokenIds: [],
        blockSize: 0,
        loraId: null,
        loraName: null,
        medium,
        tier: tierOfMedium(medium),
      },
    }),
  );

const removedCmd = fc
  .record({ w: worker, hashes: fc.array(hash, { minLength: 1, maxLength: 3 }), medium })
  .map(
    ({ w, hashes, medium }): Command => ({
      kind: "event",
      w,
      event: { type: "removed", blockHashes: hashes, medium, tier: tierOfMedium(medium) },
    }),
  );

const command: fc.Arbitrary<Command> = fc.oneof(
  { arbitrary: storedCmd, weight: 6 },
  { arbitrary: offloadCmd, weight: 1 },
  { arbitrary: removedCmd, weight: 3 },
  {
    arbitrary: worker.map((w): Command => ({ kind: "event", w, event: { type: "cleared" } })),
    weight: 1,
  },
  { arbitrary: worker.map((w): Command => ({ kind: "removeWorker", w })), weight: 1 },
  { arbitrary: fc.nat(3).map((back): Command => ({ kind: "repeat", back })), weight: 2 },
  {
    arbitrary: fc.nat(40).map((budget): Command => ({ kind: "reclaim", budget })),
    weight: 2,
  },
);

/** Every 3-block prompt over the vocabulary, plus one block too many for any chain. */
const ALL_PROMPTS: number[][] = Array.from({ length: 1 << (3 * BS) }, (_, bits) =>
  Array.from({ length: 3 * BS + 1 }, (_, i) => (bits >> i) & 1),
);

function check(
  index: RadixTreeIndex,
  model: ReferenceIndex,
  prompts: { tokens: number[]; lora: string | null }[],
): void {
  for (const { tokens, lora } of prompts) {
    const got = index.findMatches(computeBlockKeys(tokens, BS, lora));
    expect(got.blocks).toBe(Math.floor(tokens.length / BS));
    expect(got.workers).toEqual(model.match(tokens, lora));
  }
  // Nodes held only by cleared workers stay allocated until reclaimed.
  const { nodes, reclaimPendingBlocks, ...rest } = index.stats();
  const { nodes: modelNodes, reclaimPendingBlocks: _, ...modelRest } = model.stats();
  expect(rest).toEqual(modelRest);
  if (!index.reclaimPending) {
    expect({ nodes, reclaimPendingBlocks }).toEqual({ nodes: modelNodes, reclaimPendingBlocks: 0 });
  }
}

/** Plays `commands`; `each` is called after every step. */
function play(
  commands: Command[],
  index: RadixTreeIndex,
  model: ReferenceIndex,
  each: (applied: ReturnType<RadixTreeIndex["applyEvent"]> | null, expected: unknown) => void,
): void {
  const storedSeen: { w: number; event: KvEvent }[] = [];
  for (let c of commands) {
    if (c.kind === "repeat") {
      const prev = storedSeen[storedSeen.length - 1 - c.back];
      if (prev === undefined) continue;
      c = { kind: "event", ...prev };
    } else if (c.kind === "event" && c.event.type === "stored") {
      storedSeen.push({ w: c.w, event: c.event });
    }
    if (c.kind === "reclaim") {
      index.reclaim(c.budget);
      each(null, null);
      continue;
    }
    const key = WORKERS[c.w]!;
    if (c.kind === "removeWorker") {
      index.removeWorker(key);
      model.removeWorker(key);
      each(null, null);
    } else {
      each(index.applyEvent(key, c.event), model.apply(key, c.event));
    }
  }
}

describe("RadixTreeIndex against a brute-force model", () => {
  it("agrees on matches and stats after every step of random event streams", () => {
    fc.assert(
      fc.property(fc.array(command, { minLength: 1, maxLength: 40 }), (commands) => {
        const index = new RadixTreeIndex({ blockSize: BS, initialCapacity: 16 });
        const model = new ReferenceIndex(BS);
        play(commands, index, model, (got, want) => {
          if (got !== null) expect(got).toEqual(want);
          check(index, model, model.prompts());
        });
        const all = LORAS.flatMap((lora) => ALL_PROMPTS.map((tokens) => ({ tokens, lora })));
        check(index, model, all);
        while (index.reclaim(7)) check(index, model, model.prompts());
        check(index, model, all);
        expect(index.capacityBytes).toBeGreaterThan(0);
      }),
      { numRuns: 300 },
    );
  });

  it("with a global cap and per-worker capacities, never knows more than the model", () => {
    fc.assert(
      fc.property(
        fc.array(command, { minLength: 1, maxLength: 40 }),
        fc.integer({ min: 1, max: 6 }),
        fc.array(fc.option(fc.integer({ min: 1, max: 4 })), {
          minLength: WORKERS.length,
          maxLength: WORKERS.length,
        }),
        (commands, maxBlocks, caps) => {
          const index = new RadixTreeIndex({ blockSize: BS, initialCapacity: 16, maxBlocks });
          for (const [i, w] of WORKERS.entries()) index.setWorkerCapacity(w, caps[i] ?? null);
          // Cap evictions forget that a hash was used for two blocks: compared with the
          // model before the parent_ambiguous rule, which knows at least as much.
          const model = new ReferenceIndex(BS, false);
          play(commands, index, model, () => {
            const s = index.stats();
            expect(s.workerBlocks + s.reclaimPendingBlocks).toBeLessThanOrEqual(maxBlocks);
            for (const { tokens, lora } of model.prompts()) {
              const got = index.findMatches(computeBlockKeys(tokens, BS, lora)).workers;
              const want = new Map(model.match(tokens, lora).map((m) => [m.worker, m]));
              for (const g of got) {
                const m = want.get(g.worker);
                if (m === undefined) {
                  expect(g.disk).toBe(0);
                  continue;
                }
                expect(g.gpu).toBeLessThanOrEqual(m.gpu);
                expect(g.host).toBeLessThanOrEqual(m.host);
                expect(g.disk).toBeLessThanOrEqual(m.disk);
              }
            }
          });
        },
      ),
      { numRuns: 300 },
    );
  });
});
