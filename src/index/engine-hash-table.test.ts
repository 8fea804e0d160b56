/**
 * `EngineHashTable` against a plain Map model: random finds, inserts (right after a
 * missed `find` of the same key, of another key, or with no find), touches, removals
 * and whole workers removed, with many workers sharing few engine hashes (so the groups
 * of eight neighbouring worker slots that share a home fill up, collide and overlap),
 * through several incremental growths. Every key must be found where the model says,
 * absent keys never, and the least-recently-stored chain must be the model's order.
 */

import { describe, expect, it } from "vitest";
import { seededRng } from "../util/rng.js";
import { ENTRY_LAYOUT, EngineHashTable, FREE } from "./engine-hash-table.js";

interface Held {
  id: number;
  node: number;
  tiers: number;
}

const WORKERS = 40;
const HIS = [0, 1, -1, 0x7fffffff, -0x80000000];

function run(seed: number, steps: number): void {
  const rand = seededRng(seed);
  const pick = (n: number) => Math.floor(rand() * n);
  const table = new EngineHashTable(16);
  const model = new Map<string, Held>();
  /** Model keys from least to most recently stored. */
  let order: string[] = [];
  const keyOf = (wk: number, hi: number, lo: number) => `${wk}:${hi}:${lo}`;
  const randomKey = (): [number, number, number] => {
    const w = pick(WORKERS);
    const kind = rand() < 0.8 ? 0 : 1;
    return [(w << 1) | kind, HIS[pick(HIS.length)]!, pick(24) - 4];
  };
  const add = (wk: number, hi: number, lo: number) => {
    const node = pick(1000);
    const tiers = 1 + pick(7);
    const id = table.insert(wk, hi, lo, node, tiers);
    model.set(keyOf(wk, hi, lo), { id, node, tiers });
    order.push(keyOf(wk, hi, lo));
  };
  const drop = (key: string) => {
    table.remove(model.get(key)!.id);
    model.delete(key);
    order = order.filter((k) => k !== key);
  };
  const check = () => {
    expect(table.live).toBe(model.size);
    for (const [key, held] of model) {
      const [wk, hi, lo] = key.split(":").map(Number) as [number, number, number];
      const e = table.find(wk, hi, lo);
      expect(e).toBe(held.id);
      expect(table.node(e)).toBe(held.node);
      expect(table.meta(e)).toBe((wk << 3) | held.tiers);
    }
    for (let i = 0; i < 50; i++) {
      const [wk, hi, lo] = randomKey();
      if (!model.has(keyOf(wk, hi, lo))) expect(table.find(wk, hi, lo)).toBe(-1);
    }
    const rec = table.copyRecords();
    const L = ENTRY_LAYOUT;
    const chain: string[] = [];
    for (let e = table.oldest; e >= 0; e = rec[e * L.stride + L.newer]! - 1) {
      const r = e * L.stride;
      chain.push(keyOf(rec[r + L.meta]! >>> 3, rec[r + L.hi]! | 0, rec[r + L.lo]! | 0));
    }
    expect(chain).toEqual(order);
  };

  for (let step = 0; step < steps; step++) {
    const r = rand();
    const [wk, hi, lo] = randomKey();
    const key = keyOf(wk, hi, lo);
    if (r < 0.55) {
      // Find, then insert on a miss or touch on a hit (the store path).
      const e = table.find(wk, hi, lo);
      expect(e >= 0).toBe(model.has(key));
      if (e < 0) add(wk, hi, lo);
      else {
        table.touch(e);
        order = order.filter((k) => k !== key);
        order.push(key);
      }
    } else if (r < 0.65) {
      // A missed find of one key, then the insert of another: the miss must not be used.
      const [wk2, hi2, lo2] = randomKey();
      table.find(wk2, hi2, lo2);
      if (!model.has(key)) add(wk, hi, lo);
    } else if (r < 0.72) {
      // A missed find, a removal (which may shift the probe run), then the insert.
      if (model.has(key) || model.size === 0) continue;
      expect(table.find(wk, hi, lo)).toBe(-1);
      drop([...model.keys()][pick(model.size)]!);
      add(wk, hi, lo);
    } else if (r < 0.77) {
      if (!model.has(key)) add(wk, hi, lo);
    } else if (r < 0.98) {
      if (model.size > 0) drop(order[pick(order.length)]!);
    } else {
      // A worker removed: all its entries, found by scanning the records.
      const w = pick(WORKERS);
      const records = table.copyRecords();
      for (let e = 0; e < table.top; e++) {
        const meta = table.meta(e);
        if (meta === FREE || meta >>> 4 !== w) continue;
        const k = keyOf(
          meta >>> 3,
          records[e * ENTRY_LAYOUT.stride + ENTRY_LAYOUT.hi]! | 0,
          table.lo(e),
        );
        drop(k);
      }
    }
    if (step % 997 === 0) check();
  }
  check();
}

describe("EngineHashTable", () => {
  it("agrees with a Map model through inserts, removals, worker removals and growths", () => {
    for (let seed = 1; seed <= 4; seed++) run(seed, 12_000);
  });

  it("grows past many incremental migrations and stays exact", () => {
    const table = new EngineHashTable(16);
    const ids: number[] = [];
    for (let i = 0; i < 20_000; i++) {
      const wk = (i % 64) << 1;
      const lo = i >>> 6;
      expect(table.find(wk, 7, lo)).toBe(-1);
      ids.push(table.insert(wk, 7, lo, i, 1));
    }
    for (let i = 0; i < 20_000; i += 3) table.remove(ids[i]!);
    for (let i = 0; i < 20_000; i++) {
      expect(table.find((i % 64) << 1, 7, i >>> 6)).toBe(i % 3 === 0 ? -1 : ids[i]);
    }
  });
});
