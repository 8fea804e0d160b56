/**
 * Worker slots (`worker-slots.ts`): ranks in key order, rebuilt when stale, against a sorted
 * model over random registrations, retirements and recycled slots.
 */

import { describe, expect, it } from "vitest";
import { type WorkerKey, workerKey } from "../protocol/worker.js";
import { seededRng } from "../util/rng.js";
import { WorkerSlots } from "./worker-slots.js";

describe("WorkerSlots key order", () => {
  it("keeps live slots in key order and sorts matched slots by key as workers come and go", () => {
    const rand = seededRng(11);
    const slots = new WorkerSlots();
    const live = new Map<WorkerKey, number>();
    const retired: number[] = [];
    for (let step = 0; step < 6_000; step++) {
      const r = rand();
      if (r < 0.55 || live.size === 0) {
        const key = workerKey(`w${Math.floor(rand() * 3_000)}`);
        const slot = slots.ensure(key);
        if (live.has(key)) expect(slot).toBe(live.get(key));
        live.set(key, slot);
      } else if (r < 0.8) {
        const keys = [...live.keys()];
        const key = keys[Math.floor(rand() * keys.length)]!;
        slots.retire(live.get(key)!);
        retired.push(live.get(key)!);
        live.delete(key);
      } else if (retired.length > 0) {
        slots.recycle(retired.pop()!);
      }
      if (step % 50 !== 0) continue;
      const byKey = [...live.entries()].sort((a, b) => (a[0] < b[0] ? -1 : 1));
      expect(slots.order()).toEqual(byKey.map(([, s]) => s));
      // A few matched slots (sorted by rank) and many (picked out of the order).
      for (const share of [0.02, 0.5]) {
        const picked = byKey.filter(() => rand() < share);
        if (picked.length === 0) continue;
        const order = [...picked].sort(() => rand() - 0.5);
        order.forEach(([, s], k) => {
          slots.touched[k] = s;
          slots.diskRun[s] = 1;
        });
        const sorted = slots.sortMatched(picked.length);
        expect(Array.from(sorted.subarray(0, picked.length))).toEqual(picked.map(([, s]) => s));
        for (const [, s] of picked) slots.diskRun[s] = 0;
      }
    }
  });
});
