import { describe, expect, it } from "vitest";
import { workerKey } from "../protocol/worker.js";
import { RoutedPredictions } from "./routed-predictions.js";

const W = workerKey("w");
const at = (requestId: string, atMs: number, stamp = 1) => ({
  requestId,
  worker: W,
  stamp,
  atMs,
});

describe("RoutedPredictions", () => {
  it("gives a request's prediction back once, within the TTL only", () => {
    const r = new RoutedPredictions(2000);
    r.note(at("a", 0, 1));
    r.note(at("b", 1500, 2));
    expect(r.take("a", 1999)?.stamp).toBe(1);
    expect(r.take("a", 1999)).toBeUndefined();
    expect(r.take("b", 3499)?.stamp).toBe(2);
    r.note(at("c", 4000, 3));
    expect(r.take("c", 6000)).toBeUndefined();
    expect(r.size).toBe(0);
  });

  it("keeps nothing for a request that recorded nothing, and the newest of a reused id", () => {
    const r = new RoutedPredictions(2000);
    r.note(at("a", 0, 0));
    expect(r.take("a", 1)).toBeUndefined();
    r.note(at("x", 0, 5));
    r.note(at("x", 1000, 6));
    // The first record's expiry does not take the second with it.
    expect(r.take("x", 2500)?.stamp).toBe(6);
  });

  it("holds at most its bound, dropping the oldest", () => {
    const r = new RoutedPredictions(60_000, 3);
    for (let i = 0; i < 5; i++) r.note(at(`r${i}`, i, i + 1));
    expect(r.size).toBe(3);
    expect(r.take("r1", 10)).toBeUndefined();
    expect(r.take("r2", 10)?.stamp).toBe(3);
  });
});
