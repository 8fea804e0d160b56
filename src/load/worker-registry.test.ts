import { describe, expect, it } from "vitest";
import { workerKey } from "../protocol/worker.js";
import { WorkerRegistry, WorkerSpecError } from "./worker-registry.js";

const base = { url: "http://127.0.0.1:8000", kind: "vllm" as const, blockSize: 16 };

describe("WorkerRegistry", () => {
  it("normalises specs and lists routable workers by model", () => {
    const r = new WorkerRegistry();
    const a0 = r.upsert({ ...base, workerId: "a", model: "m1" });
    r.upsert({ ...base, workerId: "a", dpRank: 1, model: "m1" });
    r.upsert({ ...base, workerId: "b", model: "m2", metricsUrl: null });
    r.upsert({ ...base, workerId: "any" });
    r.upsert({ ...base, workerId: "store:mc", kind: "mooncake-store" });
    expect(a0).toMatchObject({
      key: workerKey("a", 0),
      metricsUrl: "http://127.0.0.1:8000/metrics",
      model: "m1",
      numGpuBlocks: null,
    });
    expect(r.routable().map((w) => w.key)).toEqual(["a#0", "a#1", "b#0", "any#0"]);
    expect(r.routable("m1").map((w) => w.key)).toEqual(["a#0", "a#1", "any#0"]);
    expect(r.routable("zzz").map((w) => w.key)).toEqual(["any#0"]);
    expect(r.storeKeys()).toEqual(["store:mc#0"]);
    expect(r.models()).toEqual(["m1", "m2"]);
    expect(r.get(workerKey("b"))?.metricsUrl).toBeNull();
  });

  it("invalidates the routable cache on changes", () => {
    const r = new WorkerRegistry();
    r.upsert({ ...base, workerId: "a", dpRank: 0 });
    r.upsert({ ...base, workerId: "a", dpRank: 1 });
    expect(r.routable().length).toBe(2);
    const v = r.version;
    expect(r.removeWorker("a")).toEqual(["a#0", "a#1"]);
    expect(r.version).toBeGreaterThan(v);
    expect(r.routable().length).toBe(0);
    expect(r.remove(workerKey("a"))).toBe(false);
  });

  it("shares one list among models no worker names, so callers cannot grow the cache", () => {
    const r = new WorkerRegistry();
    r.upsert({ ...base, workerId: "a", model: "m1" });
    r.upsert({ ...base, workerId: "any" });
    const first = r.routable("nope-1");
    expect(first.map((w) => w.key)).toEqual(["any#0"]);
    for (let i = 2; i < 100; i++) expect(r.routable(`nope-${i}`)).toBe(first);
    expect(r.routable("m1")).toBe(r.routable("m1"));
    expect(r.routable("m1").map((w) => w.key)).toEqual(["a#0", "any#0"]);
    r.upsert({ ...base, workerId: "b", model: "nope-1" });
    expect(r.routable("nope-1").map((w) => w.key)).toEqual(["any#0", "b#0"]);
    expect(r.routable("nope-2").map((w) => w.key)).toEqual(["any#0"]);
  });

  it("rejects bad specs naming the field", () => {
    const r = new WorkerRegistry();
    const field = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        return e instanceof WorkerSpecError ? e.field : "other";
      }
      return "none";
    };
    expect(field(() => r.upsert({ ...base, workerId: "" }))).toBe("workerId");
    expect(field(() => r.upsert({ ...base, workerId: "a#1" }))).toBe("workerId");
    expect(field(() => r.upsert({ ...base, workerId: "a", dpRank: -1 }))).toBe("dpRank");
    expect(field(() => r.upsert({ ...base, workerId: "a", blockSize: 0 }))).toBe("blockSize");
    expect(field(() => r.upsert({ ...base, workerId: "a", url: "not a url" }))).toBe("url");
    expect(field(() => r.upsert({ ...base, workerId: "a", url: "ftp://x" }))).toBe("url");
    expect(field(() => r.upsert({ ...base, workerId: "a", kind: "tgi" as never }))).toBe("kind");
    expect(field(() => r.upsert({ ...base, workerId: "a", numGpuBlocks: 1.5 }))).toBe(
      "numGpuBlocks",
    );
    expect(r.size).toBe(0);
  });
});
