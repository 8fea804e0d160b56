import { describe, expect, it } from "vitest";
import { Fifo } from "./fifo.js";

describe("Fifo", () => {
  it("is FIFO across compactions", () => {
    const q = new Fifo<number>();
    for (let i = 0; i < 5000; i++) q.push(i);
    const seen: number[] = [];
    for (let i = 0; i < 3000; i++) {
      seen.push(q.peek()!);
      q.shift();
    }
    q.push(5000);
    while (q.length > 0) seen.push(q.shift()!);
    expect(seen).toEqual(Array.from({ length: 5001 }, (_, i) => i));
    expect(q.peek()).toBeUndefined();
    expect(q.shift()).toBeUndefined();
  });

  it("counts, empties, and is reusable after clear and after draining", () => {
    const q = new Fifo<string>();
    expect(q.length).toBe(0);
    expect(q.shift()).toBeUndefined();
    q.push("a");
    q.push("b");
    expect(q.length).toBe(2);
    expect(q.shift()).toBe("a");
    expect(q.length).toBe(1);
    q.clear();
    expect(q.length).toBe(0);
    expect(q.peek()).toBeUndefined();
    q.push("c");
    expect(q.shift()).toBe("c");
    expect(q.length).toBe(0);
    q.push("d");
    expect(q.peek()).toBe("d");
    expect(q.length).toBe(1);
  });

  it("interleaves pushes and shifts past many compactions in order", () => {
    const q = new Fifo<number>();
    let next = 0;
    let expected = 0;
    for (let round = 0; round < 200; round++) {
      for (let i = 0; i < 37; i++) q.push(next++);
      for (let i = 0; i < 29; i++) expect(q.shift()).toBe(expected++);
      expect(q.length).toBe(next - expected);
    }
    while (q.length > 0) expect(q.shift()).toBe(expected++);
    expect(expected).toBe(next);
  });

  it("replaceNewest replaces newest first up to the first item kept, after shifts too", () => {
    const q = new Fifo<number>();
    for (let i = 0; i < 6; i++) q.push(i);
    q.shift();
    const seen: number[] = [];
    q.replaceNewest((x) => {
      seen.push(x);
      return x === 3 ? x : x * 10;
    });
    expect(seen).toEqual([5, 4, 3]);
    const out: number[] = [];
    while (q.length > 0) out.push(q.shift()!);
    expect(out).toEqual([1, 2, 3, 40, 50]);
    q.replaceNewest(() => 7); // empty: nothing to visit
    expect(q.length).toBe(0);
  });
});
