import { describe, expect, it } from "vitest";
import { workerKey } from "../protocol/worker.js";
import { StreamCounters } from "./stream-state.js";

describe("StreamCounters events", () => {
  it("counts the index's answers and the opaque stored events under one record", () => {
    const c = new StreamCounters();
    expect(c.eventCounts()).toEqual({});
    c.countEvent("stored", "applied");
    c.countEvent("stored", "applied");
    c.countEvent("removed", "block_not_found");
    c.countEvent("cleared", "applied");
    c.countOpaqueExtraKeys();
    const s = c.snapshot({
      worker: workerKey("w"),
      endpoint: "tcp://127.0.0.1:1",
      replayEndpoint: null,
      topic: "",
      format: "vllm",
    });
    expect(s.events).toEqual({
      "stored/applied": 2,
      "removed/block_not_found": 1,
      "cleared/applied": 1,
      "stored/opaque_extra_keys": 1,
    });
    // The snapshot is a copy.
    c.countEvent("stored", "applied");
    expect(s.events["stored/applied"]).toBe(2);
  });
});
