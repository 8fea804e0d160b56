import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type CacheEvent, PagedKvCache } from "./kv-cache.js";

const BS = 4;

function setup(numBlocks: number, seed = 7) {
  const events: CacheEvent[] = [];
  const cache = new PagedKvCache({ numBlocks, blockSize: BS, seed }, (e) => events.push(e));
  return { cache, events };
}

const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

describe("PagedKvCache", () => {
  it("stores full blocks with chained parents and reuses the prefix", () => {
    const { cache, events } = setup(16);
    const a = cache.sequence(range(100, 10));
    expect(cache.admit(a)).toEqual({ hitTokens: 0, newBlocks: 3 });
    expect(events).toHaveLength(1);
    const stored = events[0]!;
    if (stored.type !== "stored") throw new Error("expected stored");
    expect(stored.blockHashes).toHaveLength(2);
    expect(stored.parentHash).toBeNull();
    expect(stored.tokenIds).toEqual(range(100, 8));
    expect(stored.blockSize).toBe(BS);
    for (const h of stored.blockHashes) expect(h).toMatch(/^[0-9a-f]{16}$/);

    // Decode fills the third block: cached with the second block as parent.
    a.tokens.push(1, 2);
    expect(cache.grow(a)).toBe(true);
    const decode = events[1]!;
    if (decode.type !== "stored") throw new Error("expected stored");
    expect(decode.parentHash).toBe(stored.blockHashes[1]);
    expect(decode.tokenIds).toEqual([108, 109, 1, 2]);
    cache.free(a);

    const b = cache.sequence([...range(100, 8), 55, 56]);
    expect(cache.admit(b)).toEqual({ hitTokens: 8, newBlocks: 1 });
    expect(cache.stats()).toMatchObject({ queries: 20, hits: 8, admitted: 2 });
  });

  it("leaves the last prompt token to compute when the prompt is all cached", () => {
    const { cache } = setup(16);
    const a = cache.sequence(range(0, 8));
    cache.admit(a);
    cache.free(a);
    const b = cache.sequence(range(0, 8));
    expect(cache.admit(b)).toEqual({ hitTokens: 4, newBlocks: 1 });
  });

  it("separates LoRA adapters and hash seeds", () => {
    const { cache } = setup(16);
    const a = cache.sequence(range(0, 9), "adapter-a");
    cache.admit(a);
    cache.free(a);
    expect(cache.admit(cache.sequence(range(0, 9), "adapter-b"))!.hitTokens).toBe(0);
    expect(cache.admit(cache.sequence(range(0, 9), "adapter-a"))!.hitTokens).toBe(8);

    const other = setup(16, 8);
    other.cache.admit(other.cache.sequence(range(0, 9)));
    const mine = setup(16, 7);
    mine.cache.admit(mine.cache.sequence(range(0, 9)));
    expect(other.events[0]).not.toEqual(mine.events[0]);
  });

  it("frees tail blocks first and evicts least recently freed blocks first", () => {
    const { cache, events } = setup(7); // 6 usable blocks
    const a = cache.sequence(range(0, 12)); // 3 blocks
    cache.admit(a);
    const [b1, b2, b3] = a.blocks;
    cache.free(a);
    // Untouched blocks first, then a's blocks tail first.
    expect(cache.freeQueueOrder()).toEqual([4, 5, 6, b3, b2, b1]);

    const storedA = events[0]!;
    if (storedA.type !== "stored") throw new Error("expected stored");
    // 5 new blocks: takes the 3 never-used, then a's tail (b3) and b2.
    const c = cache.sequence(range(1000, 20));
    cache.admit(c);
    const removed = events.filter((e) => e.type === "removed");
    expect(removed).toEqual([
      { type: "removed", blockHashes: [storedA.blockHashes[2]] },
      { type: "removed", blockHashes: [storedA.blockHashes[1]] },
    ]);
    // a's first block is still cached.
    expect(cache.cachedHashCounts().has(storedA.blockHashes[0]!)).toBe(true);
  });

  it("touching a cached block takes it out of the free queue", () => {
    const { cache } = setup(5); // 4 usable
    const a = cache.sequence(range(0, 9)); // 3 blocks, 2 cached
    cache.admit(a);
    cache.free(a);
    const b = cache.sequence([...range(0, 8), 42]);
    expect(cache.admit(b)).toEqual({ hitTokens: 8, newBlocks: 1 });
    expect(cache.numFreeBlocks).toBe(1);
    expect(cache.freeQueueOrder()).not.toContain(b.blocks[0]);
    expect(cache.usage()).toBe(0.75);
  });

  it("refuses admission without side effects when blocks are short", () => {
    const { cache, events } = setup(4); // 3 usable
    const a = cache.sequence(range(0, 8));
    cache.admit(a);
    const before = events.length;
    const b = cache.sequence(range(50, 8));
    expect(cache.admit(b)).toBeNull();
    expect(b.blocks).toEqual([]);
    expect(events.length).toBe(before);
    expect(cache.numFreeBlocks).toBe(1);
    a.tokens.push(1, 2, 3, 4, 5);
    expect(cache.grow(a)).toBe(false);
  });

  it("counts a hit block in the free queue against the free blocks it occupies", () => {
    const { cache } = setup(4); // 3 usable
    const a = cache.sequence(range(0, 5)); // 2 blocks, 1 cached
    cache.admit(a);
    cache.free(a);
    const big = cache.sequence([...range(0, 4), ...range(90, 8)]); // hit 1, needs 2 more
    expect(cache.admit(big)).toEqual({ hitTokens: 4, newBlocks: 2 });
  });

  it("announces duplicates of an identical block like vLLM (no de-duplication)", () => {
    const { cache, events } = setup(16);
    const a = cache.sequence(range(0, 5));
    const b = cache.sequence(range(0, 5));
    cache.admit(a);
    cache.admit(b); // hits a's first block
    a.tokens.push(9, 9, 9);
    b.tokens.push(9, 9, 9);
    cache.grow(a);
    cache.grow(b);
    const stored = events.filter((e) => e.type === "stored");
    expect(stored).toHaveLength(3);
    const h = (stored[1] as { blockHashes: string[] }).blockHashes[0]!;
    expect((stored[2] as { blockHashes: string[] }).blockHashes[0]).toBe(h);
    expect(cache.cachedHashCounts().get(h)).toBe(2);
  });

  it("resets only when every block is free", () => {
    const { cache, events } = setup(8);
    const a = cache.sequence(range(0, 9));
    cache.admit(a);
    expect(cache.resetPrefixCache()).toBe(false);
    cache.free(a);
    expect(cache.resetPrefixCache()).toBe(true);
    expect(events.at(-1)).toEqual({ type: "cleared" });
    expect(cache.numCachedBlocks).toBe(0);
    expect(cache.admit(cache.sequence(range(0, 9)))!.hitTokens).toBe(0);
  });

  it("rejects bad geometry", () => {
    expect(() => new PagedKvCache({ numBlocks: 1, blockSize: 16, seed: 1 })).toThrow(/numBlocks/);
    expect(() => new PagedKvCache({ numBlocks: 8, blockSize: 0, seed: 1 })).toThrow(/blockSize/);
  });
});

/** Apply events to a multiset the way a subscriber would: stored adds, removed subtracts. */
function announced(events: readonly CacheEvent[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const e of events) {
    switch (e.type) {
      case "stored":
        for (const h of e.blockHashes) m.set(h, (m.get(h) ?? 0) + 1);
        break;
      case "removed":
        for (const h of e.blockHashes) {
          const n = (m.get(h) ?? 0) - 1;
          if (n < 0) throw new Error(`removed ${h} never stored`);
          if (n === 0) m.delete(h);
          else m.set(h, n);
        }
        break;
      case "cleared":
        m.clear();
        break;
    }
  }
  return m;
}

type Op =
  | { kind: "admit"; prefix: number; len: number }
  | { kind: "decode"; slot: number; n: number }
  | { kind: "free"; slot: number }
  | { kind: "reset" };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant("admit" as const),
      prefix: fc.integer({ min: 0, max: 3 }),
      len: fc.integer({ min: 1, max: 14 }),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant("decode" as const),
      slot: fc.nat(),
      n: fc.integer({ min: 1, max: 5 }),
    }),
  },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("free" as const), slot: fc.nat() }) },
  { weight: 1, arbitrary: fc.constant({ kind: "reset" as const }) },
);

describe("PagedKvCache events", () => {
  it("stored minus removed always equals the cached set, and block accounting holds", () => {
    fc.assert(
      fc.property(
        fc.array(opArb, { maxLength: 60 }),
        fc.integer({ min: 3, max: 12 }),
        (ops, numBlocks) => {
          const { cache, events } = setup(numBlocks);
          const live: ReturnType<typeof cache.sequence>[] = [];
          let next = 5000;
          for (const op of ops) {
            switch (op.kind) {
              case "admit": {
                // A few shared prefixes so hits happen.
                const seq = cache.sequence([...range(op.prefix * 100, 6), ...range(next, op.len)]);
                next += op.len;
                if (cache.admit(seq) !== null) live.push(seq);
                break;
              }
              case "decode": {
                if (live.length === 0) break;
                const seq = live[op.slot % live.length]!;
                for (let i = 0; i < op.n; i++) seq.tokens.push(7 + i);
                if (!cache.grow(seq)) seq.tokens.length -= op.n;
                break;
              }
              case "free": {
                if (live.length === 0) break;
                const [seq] = live.splice(op.slot % live.length, 1);
                cache.free(seq!);
                break;
              }
              case "reset":
                cache.resetPrefixCache();
                break;
            }
            expect(announced(events)).toEqual(cache.cachedHashCounts());
            const held = new Set(live.flatMap((s) => s.blocks));
            expect(cache.numFreeBlocks + held.size).toBe(numBlocks - 1);
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});
