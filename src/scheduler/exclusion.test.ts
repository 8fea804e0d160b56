import { describe, expect, it } from "vitest";
import { DEFAULT_SCHEDULER_CONFIG, OUTLIER_MIN_KV_LOAD } from "./defaults.js";
import { computeExclusions } from "./exclusion.js";
import { cand } from "./test-helpers.js";

describe("KV-outlier exclusion needs a shortage of headroom", () => {
  it("keeps a holder far above its peers while its cache is mostly free", () => {
    // One long prompt lifted the holder to 30 % while the others sit near 1 %:
    // mean + 2·std ≈ 0.22, yet the holder has 70 % of its cache free.
    const cs = [
      cand("holder", { load: { kvLoad: 0.3 } }),
      ...["a", "b", "c", "d", "e", "f", "g"].map((id) => cand(id, { load: { kvLoad: 0.01 } })),
    ];
    const ex = computeExclusions(cs, DEFAULT_SCHEDULER_CONFIG);
    expect(ex.kvMean! + 2 * ex.kvStd!).toBeLessThan(0.3);
    expect(ex.excluded[0]).toBeNull();
  });

  it("still excludes an outlier that is also short of room", () => {
    const cs = [
      cand("full", { load: { kvLoad: OUTLIER_MIN_KV_LOAD + 0.1 } }),
      ...["a", "b", "c", "d", "e", "f", "g"].map((id) => cand(id, { load: { kvLoad: 0.2 } })),
    ];
    expect(computeExclusions(cs, DEFAULT_SCHEDULER_CONFIG).excluded[0]).toBe("kv_outlier");
  });
});
