import { describe, expect, it } from "vitest";
import { ApplySlicer } from "./apply-slicer.js";

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("ApplySlicer", () => {
  it("runs at most a slice of work per event-loop turn, in arrival order", async () => {
    let clock = 0;
    const slicer = new ApplySlicer(5, () => clock);
    const ran: number[] = [];
    const perTurn: number[] = [];
    let thisTurn = 0;
    for (let i = 0; i < 40; i++) {
      slicer.run(() => {
        clock += 1; // each task takes 1 ms
        ran.push(i);
        thisTurn++;
      });
    }
    // The first slice ran synchronously; the rest waits.
    expect(ran).toHaveLength(5);
    expect(slicer.waiting).toBe(35);
    while (slicer.waiting > 0) {
      perTurn.push(thisTurn);
      thisTurn = 0;
      await turn();
    }
    perTurn.push(thisTurn);
    expect(ran).toEqual(Array.from({ length: 40 }, (_, i) => i));
    expect(Math.max(...perTurn)).toBeLessThanOrEqual(5);
    expect(perTurn.filter((n) => n > 0).length).toBeGreaterThanOrEqual(8);
  });

  it("lets timers and I/O callbacks run between slices", async () => {
    const slicer = new ApplySlicer(5); // the real clock: each task busy-waits 2 ms
    const log: string[] = [];
    const timer = new Promise<void>((resolve) =>
      setTimeout(() => {
        log.push("timer");
        resolve();
      }, 0),
    );
    for (let i = 0; i < 20; i++) {
      slicer.run(() => {
        const end = performance.now() + 2;
        while (performance.now() < end);
        log.push("task");
      });
    }
    await timer;
    const firstTimer = log.indexOf("timer");
    expect(firstTimer).toBeGreaterThan(0);
    expect(firstTimer).toBeLessThan(20);
    while (slicer.waiting > 0) await turn();
    expect(log.filter((l) => l === "task")).toHaveLength(20);
  });

  it("a receive loop yields once the slice is spent, in order with queued tasks", async () => {
    let clock = 0;
    const slicer = new ApplySlicer(5, () => clock);
    const order: string[] = [];
    slicer.run(() => {
      clock += 6;
      order.push("a");
    });
    expect(slicer.spent()).toBe(true);
    slicer.run(() => order.push("b"));
    const yielded = slicer.yieldTurn().then(() => order.push("loop"));
    slicer.run(() => order.push("c"));
    await yielded;
    while (slicer.waiting > 0) await turn();
    // The loop resumes after what was queued before it (here in the same turn as "c").
    expect(order.slice(0, 2)).toEqual(["a", "b"]);
    expect(order.sort()).toEqual(["a", "b", "c", "loop"]);
  });

  it("runs a resumable task a step at a time, a slice per turn, ahead of later tasks", async () => {
    let clock = 0;
    const slicer = new ApplySlicer(5, () => clock);
    const order: string[] = [];
    let thisTurn = 0;
    let step = 0;
    slicer.runSteps(() => {
      clock += 1; // each step takes 1 ms
      order.push(`s${step}`);
      thisTurn++;
      return ++step < 12;
    });
    slicer.run(() => order.push("after"));
    // The first slice ran synchronously: 5 steps; the rest of the task waits.
    expect(order).toEqual(["s0", "s1", "s2", "s3", "s4"]);
    const perTurn: number[] = [];
    while (slicer.waiting > 0) {
      perTurn.push(thisTurn);
      thisTurn = 0;
      await turn();
    }
    perTurn.push(thisTurn);
    expect(order).toEqual([...Array.from({ length: 12 }, (_, i) => `s${i}`), "after"]);
    expect(Math.max(...perTurn)).toBeLessThanOrEqual(5);
    expect(step).toBe(12); // called exactly until it said it was done
  });
});
