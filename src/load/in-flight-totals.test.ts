import { describe, expect, it } from "vitest";
import { RunningTotals, ZERO_TOTALS } from "./in-flight-totals.js";

describe("RunningTotals", () => {
  it("adds, ends prefills, removes and subtracts", () => {
    const a = new RunningTotals();
    a.add(true, 100, 7, 1);
    a.add(false, 50, 3, 1);
    expect({ ...a }).toEqual({
      pendingPrefillTokens: 100,
      pendingRequests: 1,
      activeBlocks: 10,
      activeRequests: 2,
    });
    a.endPrefill(100);
    expect(a.pendingPrefillTokens).toBe(0);
    expect(a.pendingRequests).toBe(0);
    const b = new RunningTotals();
    b.add(false, 50, 3, 1);
    const d = new RunningTotals().difference(a, b);
    expect({ ...d }).toEqual({
      pendingPrefillTokens: 0,
      pendingRequests: 0,
      activeBlocks: 7,
      activeRequests: 1,
    });
    a.add(false, 100, 7, -1);
    a.add(false, 50, 3, -1);
    expect({ ...a }).toEqual({ ...ZERO_TOTALS });
    expect(Object.isFrozen(ZERO_TOTALS)).toBe(true);
  });
});
