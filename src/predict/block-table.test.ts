import { describe, expect, it } from "vitest";
import type { BlockKeySeq } from "../index/types.js";
import { workerKey } from "../protocol/worker.js";
import { BlockTable, type TableEntry } from "./block-table.js";
import { PredictedBlocks } from "./predicted-blocks.js";

// Keys that differ only in the low two bits of their low word share a hash.
const entry = (hi: number, lo: number): TableEntry => ({ hi, lo, spilled: false });

describe("BlockTable", () => {
  it("keeps keys whose hash collides apart, exactly, through adds and deletes", () => {
    const t = new BlockTable<TableEntry>();
    const a = entry(7, 0xfffffff8);
    const b = entry(7, 0xfffffff9);
    const c = entry(7, 0xfffffffa);
    expect(t.get(7, 0xfffffff8)).toBeUndefined();
    t.add(a);
    expect(t.get(7, 0xfffffff9)).toBeUndefined(); // the hash's holder is another key
    t.add(b);
    t.add(c);
    expect([a.spilled, b.spilled, c.spilled]).toEqual([false, true, true]);
    expect(t.size).toBe(3);
    expect(t.get(7, 0xfffffff8)).toBe(a);
    expect(t.get(7, 0xfffffff9)).toBe(b);
    expect(t.get(7, 0xfffffffa)).toBe(c);
    expect(t.get(8, 0xfffffff8)).toBeUndefined();
    t.delete(a); // the spilled keys stay found without the hash's holder
    expect(t.get(7, 0xfffffff8)).toBeUndefined();
    expect(t.get(7, 0xfffffff9)).toBe(b);
    t.delete(b);
    expect(t.get(7, 0xfffffff9)).toBeUndefined();
    expect(t.get(7, 0xfffffffa)).toBe(c);
    expect(t.size).toBe(1);
    t.clear();
    expect(t.size).toBe(0);
    expect(t.get(7, 0xfffffffa)).toBeUndefined();
  });

  it("predictions of colliding keys never stand for each other", () => {
    const p = new PredictedBlocks({ ttlMs: 1000, maxBlocksPerWorker: 100, degradedTtlMs: 0 });
    const w = workerKey("w");
    const seq = (...words: number[]) => Uint32Array.from(words) as BlockKeySeq;
    const one = seq(1, 100, 2, 200, 3, 300);
    const other = seq(1, 101, 2, 201, 3, 301); // each block's hash is one's
    p.record(w, one, 0);
    expect(p.match(other, 1).size).toBe(0);
    p.record(w, other, 1);
    expect(p.match(one, 2).get(w)).toBe(3);
    expect(p.match(other, 2).get(w)).toBe(3);
    // The engine reports `one` in full: only its predictions are confirmed.
    expect(p.matchBeyond(one, 3, () => 3).size).toBe(0);
    expect(p.match(one, 3).size).toBe(0);
    expect(p.match(other, 3).get(w)).toBe(3);
    expect(p.size(w)).toBe(3);
  });
});
