import { describe, expect, it } from "vitest";
import { workerKey } from "../protocol/worker.js";
import { StreamHealth, type StreamObservation } from "./stream-health.js";

const W = workerKey("w");
const base: StreamObservation = {
  worker: W,
  lossResets: 0,
  decodeErrors: 0,
  lastEventTimeMs: 0,
  storedApplied: 0,
  storedParentMissing: 0,
};
const opts = {
  silentAfterMs: 10_000,
  minRoutedWhileSilent: 3,
  decodeErrorsToDegrade: 3,
  recoverAfterMs: 5_000,
  maxParentMissRatio: 0.1,
};

describe("StreamHealth", () => {
  it("degrades on an unfilled gap and stays so while stored events miss their parents", () => {
    const h = new StreamHealth(opts);
    h.observe(base, 0, 0);
    expect(h.observe({ ...base, lossResets: 1 }, 0, 1000)).toEqual({
      reason: "unfilled_gap",
      changed: true,
    });
    // 84 % of the new stored events rejected (the engine extends prefixes the index lost).
    const missing = { ...base, lossResets: 1, storedApplied: 16, storedParentMissing: 84 };
    expect(h.observe(missing, 0, 7000).reason).toBe("unfilled_gap");
    // Then they apply: healthy once a whole quiet window applied cleanly.
    const clean = { ...missing, storedApplied: 116, storedParentMissing: 85 };
    expect(h.observe(clean, 0, 11_000).reason).toBe("unfilled_gap");
    expect(h.observe({ ...clean, storedApplied: 200 }, 0, 12_500)).toEqual({
      reason: null,
      changed: true,
    });
  });

  it("needs evidence to leave a gap: no stored event applied, no recovery", () => {
    const h = new StreamHealth(opts);
    h.observe(base, 0, 0);
    h.observe({ ...base, lossResets: 1 }, 0, 1000);
    expect(h.observe({ ...base, lossResets: 1 }, 0, 60_000).reason).toBe("unfilled_gap");
  });

  it("degrades a publisher silent while the worker is sent requests, not an idle one", () => {
    const h = new StreamHealth(opts);
    h.observe(base, 0, 0);
    // Idle: no requests, no events for a long time: fine.
    expect(h.observe(base, 0, 60_000).reason).toBeNull();
    // Requests routed, no batch for silentAfterMs after the first of them.
    expect(h.observe(base, 2, 61_000).reason).toBeNull();
    expect(h.observe(base, 5, 65_000).reason).toBeNull();
    expect(h.observe(base, 9, 71_000)).toEqual({ reason: "silent", changed: true });
    // Events again: healthy after recoverAfterMs without a sign.
    const talking = { ...base, lastEventTimeMs: 72_000, storedApplied: 5 };
    expect(h.observe(talking, 10, 72_000).reason).toBe("silent");
    expect(h.observe({ ...talking, lastEventTimeMs: 77_000 }, 12, 77_000).reason).toBeNull();
  });

  it("degrades on repeated decode errors within the window, not on a stray one", () => {
    const h = new StreamHealth(opts);
    h.observe(base, 0, 0);
    expect(h.observe({ ...base, decodeErrors: 1, lastEventTimeMs: 1 }, 0, 1000).reason).toBeNull();
    expect(
      h.observe({ ...base, decodeErrors: 2, lastEventTimeMs: 2 }, 0, 20_000).reason,
    ).toBeNull();
    expect(h.observe({ ...base, decodeErrors: 4, lastEventTimeMs: 3 }, 0, 21_000).reason).toBe(
      "decode_errors",
    );
    expect(h.degraded()).toEqual(new Map([[W, "decode_errors"]]));
    expect(h.transitions).toBe(1);
  });
});
