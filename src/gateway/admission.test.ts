import { describe, expect, it } from "vitest";
import { AdmissionQueue } from "./admission.js";

const never = new AbortController().signal;

describe("AdmissionQueue", () => {
  it("admits at once when nobody waits and the fleet is not busy", async () => {
    const q = new AdmissionQueue({ maxSize: 1, timeoutMs: 1000 });
    expect(await q.admit(() => false, never)).toEqual({ ok: true, waitedMs: 0 });
  });

  it("refuses when full", async () => {
    const q = new AdmissionQueue({ maxSize: 2, timeoutMs: 50 });
    const a = q.admit(() => true, never);
    const b = q.admit(() => true, never);
    expect(await q.admit(() => true, never)).toMatchObject({ ok: false, reason: "full" });
    expect(q.depth).toBe(2);
    await Promise.all([a, b]);
  });

  it("holds while busy, admits in FIFO order, newcomers behind the waiting ones", async () => {
    let busy = true;
    const q = new AdmissionQueue({ maxSize: 3, timeoutMs: 10_000, pollMs: 1_000_000 });
    const order: number[] = [];
    const a = q.admit(() => busy, never).then((r) => order.push(1) && r);
    const b = q.admit(() => busy, never).then((r) => order.push(2) && r);
    busy = false;
    // Capacity freed, but two wait: the newcomer queues behind them.
    const c = q.admit(() => busy, never).then((r) => order.push(3) && r);
    expect(q.depth).toBe(3);
    q.notify();
    await Promise.all([a, b, c]);
    expect(order).toEqual([1, 2, 3]);
    expect(q.depth).toBe(0);
  });

  it("FIFO per key: a key whose candidates are free is not held behind another's waiters", async () => {
    let busyA = true;
    const q = new AdmissionQueue({ maxSize: 4, timeoutMs: 10_000, pollMs: 1_000_000 });
    const a = q.admit(() => busyA, never, "a");
    expect(await q.admit(() => false, never, "b")).toEqual({ ok: true, waitedMs: 0 });
    // b queued behind a busy b waiter is admitted past the a waiter once b frees.
    let busyB = true;
    const b = q.admit(() => busyB, never, "b");
    expect(q.waiting("a") && q.waiting("b")).toBe(true);
    busyB = false;
    q.notify();
    expect((await b).ok).toBe(true);
    expect(q.depth).toBe(1);
    busyA = false;
    q.notify();
    expect((await a).ok).toBe(true);
    expect(q.waiting("a")).toBe(false);
  });

  it("a newcomer of another key queues behind a waiter that could go now (shared workers)", async () => {
    let busyLora = true;
    const q = new AdmissionQueue({ maxSize: 4, timeoutMs: 10_000, pollMs: 1_000_000 });
    const order: string[] = [];
    const lora = q
      .admit(() => busyLora, never, "m\u0000lora")
      .then((r) => {
        order.push("lora");
        return r;
      });
    // The adapter's worker frees; before the queue checks, a base-model request arrives.
    busyLora = false;
    expect(q.mayPass("m")).toBe(false);
    const base = q
      .admit(() => false, never, "m")
      .then((r) => {
        order.push("base");
        return r;
      });
    expect((await lora).ok).toBe(true);
    expect((await base).ok).toBe(true);
    expect(order).toEqual(["lora", "base"]);
    expect(q.mayPass("m")).toBe(true);
  });

  it("refuses after the deadline, and when the client goes away", async () => {
    const q = new AdmissionQueue({ maxSize: 5, timeoutMs: 30 });
    expect(await q.admit(() => true, never)).toMatchObject({ ok: false, reason: "timeout" });
    const ac = new AbortController();
    const p = q.admit(() => true, ac.signal);
    ac.abort();
    expect(await p).toMatchObject({ ok: false, reason: "aborted" });
    expect(q.depth).toBe(0);
  });

  it("re-checks on its own while requests wait (load scrapes change busy-ness silently)", async () => {
    let busy = true;
    const q = new AdmissionQueue({ maxSize: 1, timeoutMs: 5000, pollMs: 5 });
    const p = q.admit(() => busy, never);
    setTimeout(() => {
      busy = false;
    }, 20);
    expect((await p).ok).toBe(true);
  });
});
