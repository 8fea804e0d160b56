import { describe, expect, it } from "vitest";
import { seededRng } from "../util/rng.js";
import { NodeStore } from "./node-store.js";
import { migrateStep, SlotTable } from "./slot-table.js";

describe("SlotTable growth", () => {
  it("grows incrementally: the old table is migrated a few slots per insert", () => {
    const t = new SlotTable(16);
    const hash = (i: number) => Math.imul(i + 1, 0x9e3779b1) >>> 0;
    let live = 0;
    let grownAt = -1;
    for (let i = 0; i < 200; i++) {
      t.insert(i, hash(i), ++live);
      if (t.old !== null && grownAt < 0) grownAt = i;
    }
    expect(grownAt).toBeGreaterThan(0);
    // Right after a growth the old table is still there: it was not rehashed at once.
    const u = new SlotTable(16);
    let l = 0;
    for (let i = 0; i <= grownAt; i++) u.insert(i, hash(i), ++l);
    expect(u.old).not.toBeNull();
  });

  it("migrates a growth's old table within 64 inserts, or 256 slots per insert when larger", () => {
    // Misses probe the old table too while it is there (cold, at its full load), so the
    // window is short; but still spread over several inserts, never one long pause.
    const hash = (i: number) => Math.imul(i + 1, 0x9e3779b1) >>> 0;
    for (const capacity of [16, 1 << 10, 1 << 16]) {
      const t = new SlotTable(capacity);
      let live = 0;
      while (t.old === null) t.insert(live, hash(live), ++live);
      const oldSlots = t.old.length >>> 1;
      let window = 1;
      while (t.old !== null) {
        t.insert(live, hash(live), ++live);
        window++;
      }
      expect(window).toBeGreaterThan(1);
      expect(window).toBeLessThanOrEqual(Math.max(64, Math.ceil(oldSlots / 256)));
      if (oldSlots <= 64 * 4) expect(window).toBe(Math.ceil(oldSlots / 4));
      expect(migrateStep(oldSlots)).toBeLessThanOrEqual(256);
    }
  });

  it("a node store stays exact through growths, migrations and removals", () => {
    const rand = seededRng(7);
    const store = new NodeStore(16);
    const model = new Map<string, number>();
    const keys: [number, number][] = [];
    for (let step = 0; step < 30_000; step++) {
      const r = rand();
      if (r < 0.6 || model.size === 0) {
        // Small key space: collisions of the 32-bit slot hash are likely too.
        const hi = Math.floor(rand() * 50);
        const lo = Math.floor(rand() * 5000);
        if (model.has(`${hi}:${lo}`)) continue;
        model.set(`${hi}:${lo}`, store.create(hi, lo, -1));
        keys.push([hi, lo]);
      } else {
        const k = Math.floor(rand() * keys.length);
        const [hi, lo] = keys[k]!;
        keys[k] = keys[keys.length - 1]!;
        keys.pop();
        store.free(model.get(`${hi}:${lo}`)!);
        model.delete(`${hi}:${lo}`);
      }
      if (step % 4999 === 0) {
        for (const [key, id] of model) {
          const [hi, lo] = key.split(":").map(Number) as [number, number];
          expect(store.find(hi, lo)).toBe(id);
        }
        expect(store.find(999, 1)).toBe(-1);
      }
    }
    expect(store.live).toBe(model.size);
    for (const [key, id] of model) {
      const [hi, lo] = key.split(":").map(Number) as [number, number];
      expect(store.find(hi, lo)).toBe(id);
    }
  });
});
