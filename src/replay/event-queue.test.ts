import { describe, expect, it } from "vitest";
import { EventQueue } from "./event-queue.js";

describe("EventQueue", () => {
  it("runs actions in time order, ties in scheduling order, advancing the clock", () => {
    const q = new EventQueue();
    const log: string[] = [];
    const at = (t: number, name: string) => q.schedule(t, () => log.push(`${name}@${q.now}`));
    at(30, "c");
    at(10, "a1");
    at(20, "b");
    at(10, "a2");
    q.run();
    expect(log).toEqual(["a1@10", "a2@10", "b@20", "c@30"]);
    expect(q.now).toBe(30);
    expect(q.processed).toBe(4);
  });

  it("lets actions schedule more, and clamps the past to now", () => {
    const q = new EventQueue();
    const log: number[] = [];
    q.schedule(5, () => {
      q.after(5, () => log.push(q.now));
      q.schedule(1, () => log.push(q.now));
    });
    q.run();
    expect(log).toEqual([5, 10]);
  });

  it("orders many random times like a sort does", () => {
    const q = new EventQueue();
    const times = Array.from({ length: 500 }, (_, i) => (i * 7919) % 263);
    const seen: number[] = [];
    for (const t of times) q.schedule(t, () => seen.push(t));
    q.run();
    expect(seen).toEqual([...times].sort((a, b) => a - b));
  });

  it("refuses NaN times", () => {
    expect(() => new EventQueue().schedule(Number.NaN, () => {})).toThrow(RangeError);
  });
});
