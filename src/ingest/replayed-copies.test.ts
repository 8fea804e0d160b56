import { describe, expect, it } from "vitest";
import { ReplayedCopies } from "./replayed-copies.js";

describe("ReplayedCopies", () => {
  it("gives the digest of a kept seq once, dropping it and every older one", () => {
    const c = new ReplayedCopies<string>(10);
    for (const n of [3n, 4n, 5n, 6n]) c.add(n, `d${n}`);
    expect(c.take(2n)).toBeUndefined(); // older than kept: nothing dropped
    expect(c.size).toBe(4);
    expect(c.take(4n)).toBe("d4");
    expect(c.take(3n)).toBeUndefined();
    expect(c.size).toBe(2);
    expect(c.take(9n)).toBeUndefined(); // past the newest: all dropped
    expect(c.size).toBe(0);
  });

  it("starts over at a seq that does not follow the newest, and keeps the newest `cap`", () => {
    const c = new ReplayedCopies<number>(3);
    c.add(1n, 1);
    c.add(7n, 7);
    expect(c.take(1n)).toBeUndefined();
    for (let n = 8; n < 3000; n++) c.add(BigInt(n), n);
    expect(c.size).toBe(3);
    expect(c.take(2996n)).toBeUndefined();
    expect(c.take(2997n)).toBe(2997);
    expect(c.take(2999n)).toBe(2999);
    expect(c.size).toBe(0);
  });
});
