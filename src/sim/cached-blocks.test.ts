import { describe, expect, it } from "vitest";
import { CachedBlocks } from "./cached-blocks.js";

describe("CachedBlocks", () => {
  it("agrees with a Map of arrays under random adds and removes (duplicates, deletions, growth)", () => {
    const c = new CachedBlocks(16);
    const ref = new Map<string, number[]>();
    const hashOf = new Map<number, string>();
    let seed = 12345;
    const rand = (n: number): number => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed % n;
    };
    for (let step = 0; step < 20_000; step++) {
      const block = rand(3000);
      const held = hashOf.get(block);
      if (held !== undefined) {
        c.remove(block);
        const ids = ref.get(held)!;
        ids.splice(ids.indexOf(block), 1);
        if (ids.length === 0) ref.delete(held);
        hashOf.delete(block);
      } else {
        // Few distinct hashes (many duplicates) and hi values that collide in the table.
        const hi = rand(4) * 0x4000_0000;
        const lo = rand(400);
        const key = `${hi}:${lo}`;
        c.add(block, hi, lo);
        ref.set(key, [...(ref.get(key) ?? []), block]);
        hashOf.set(block, key);
      }
      if (step % 997 === 0) {
        expect(c.distinct).toBe(ref.size);
        for (const [key, ids] of ref) {
          const [hi, lo] = key.split(":").map(Number) as [number, number];
          const head = c.find(hi, lo);
          expect(head).toBe(ids[0]);
          expect(c.chainLength(head)).toBe(ids.length);
        }
        expect(c.find(7, 9999)).toBe(-1);
      }
    }
    expect(c.blocks).toBe(hashOf.size);
  });
});
