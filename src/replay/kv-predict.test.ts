import { describe, expect, it } from "vitest";
import { FIELDS } from "../config/fields.js";
import { workerKey } from "../protocol/worker.js";
import { runJob } from "./compare.js";
import { KvPredict, parseFault, SERVICE_PREDICT } from "./kv-predict.js";
import { parseReplayArgs, ReplayUsageError } from "./options.js";
import { parseTrace } from "./trace.js";
import { defaultParams, generateWorkload, toJsonl } from "./workloads/generators.js";

describe("replay prediction flags", () => {
  it("parses faults and the predict flags, and names a bad one", () => {
    expect(parseFault("gap:3@120", 8)).toEqual({ kind: "gap", worker: 3, atMs: 120_000 });
    expect(parseFault("silent:0@1.5", 8)).toEqual({ kind: "silent", worker: 0, atMs: 1500 });
    expect(parseFault("gap:8@1", 8)).toMatch(/not in a fleet of 8/);
    const o = parseReplayArgs(["--predict-ttl-ms", "2000", "--fallback", "--fault", "gap:1@10"])!;
    expect(o.predict).toMatchObject({
      ttlMs: 2000,
      fallback: true,
      faults: [{ kind: "gap", worker: 1, atMs: 10_000 }],
    });
    // kv runs predict-on-route as the service does by default.
    expect(parseReplayArgs([])!.predict).toMatchObject({
      ttlMs: FIELDS.predict.ttlMs.default,
      fallback: false,
      faults: [],
    });
    expect(parseReplayArgs(["--predict-ttl-ms", "0"])!.predict.ttlMs).toBe(0);
    // Replicas do not model prediction: off by default with them, refused when asked for.
    expect(parseReplayArgs(["--replicas", "2"])!.predict.ttlMs).toBe(0);
    expect(() => parseReplayArgs(["--replicas", "2", "--predict-ttl-ms", "2000"])).toThrow(
      /--replicas above 1/,
    );
    expect(() => parseReplayArgs(["--fault", "drop:1@2"])).toThrow(ReplayUsageError);
    expect(() => parseReplayArgs(["--predict-ttl-ms", "-1"])).toThrow(/--predict-ttl-ms/);
  });

  it("a gap clears the worker and loses its batches for a second; a silent one loses all after", () => {
    const keys = [workerKey("sim-0"), workerKey("sim-1")];
    const p = new KvPredict(
      {
        ttlMs: 0,
        fallback: true,
        degradedTtlMs: 60_000,
        faults: [
          { kind: "gap", worker: 0, atMs: 1000 },
          { kind: "silent", worker: 1, atMs: 2000 },
        ],
      },
      keys,
      100,
    );
    const cleared: string[] = [];
    p.tick(999, (k) => cleared.push(k));
    expect(cleared).toEqual([]);
    p.tick(1000, (k) => cleared.push(k));
    expect(cleared).toEqual(["sim-0#0"]);
    expect(p.delivers(0, 1500)).toBe(false);
    expect(p.delivers(0, 2000)).toBe(true);
    p.tick(2000, () => {});
    expect(p.delivers(1, 1999)).toBe(true);
    expect(p.delivers(1, 2000)).toBe(false);
    expect(p.delivers(1, 90_000)).toBe(false);
    // The gap is seen at the next health tick: worker 0 is degraded.
    p.tick(3000, () => {});
    expect(p.predicted.isDegraded(keys[0]!)).toBe(true);
    expect(p.stats.droppedEvents).toBe(3);
  });
});

describe("fallback after an unfilled gap, in a replay", () => {
  // docs/prediction.md's run: chat sessions (Zipf-popular system prompts) on 8 × 3,000-block
  // workers; at 100 s workers 0–3 lose a second of batches and are cleared. Every degraded
  // worker must come back, and once back, nothing the approximate view recorded may be
  // claimed beyond the index (ttl 0: any predicted block on a healthy worker would be a
  // leftover of degraded mode). Without `setHealthy` dropping the view, 70 routes claim
  // such leftovers here.
  const requests = parseTrace(
    toJsonl(generateWorkload("chat", { ...defaultParams("chat"), requests: 2000, rate: 4 })),
  );
  const run = (fallback: boolean) => {
    const o = parseReplayArgs(["--capacity-blocks", "3000", "--jobs", "1"])!;
    return runJob(requests, "kv", {
      ...o,
      predict: {
        ttlMs: 0,
        fallback,
        degradedTtlMs: o.predict.degradedTtlMs,
        faults: [0, 1, 2, 3].map((worker) => ({ kind: "gap" as const, worker, atMs: 100_000 })),
      },
    });
  };

  it("degrades the four workers, brings them back, and leaves no false positive behind", () => {
    const p = run(true).predict!;
    expect(p.degradedEntries).toBe(4);
    expect(p.recoveries).toBe(4);
    expect(p.degradedRoutes).toBeGreaterThan(0);
    expect(p.beyondIndexWhileHealthy).toBe(0);
    expect(p.overclaimsFromViewWhileHealthy).toBe(0);
    const precise = run(false).predict!;
    expect(precise.degradedEntries).toBe(0);
    expect(precise.overclaimsFromViewWhileHealthy).toBe(0);
  });
});

describe("kv runs predict-on-route by default; kv_nopredict does not", () => {
  // Agentic bursts: an agent step's siblings arrive together and share a context that no
  // engine has reported yet, so a predicting router sends them by its own decisions.
  const requests = parseTrace(
    toJsonl(generateWorkload("agentic", { ...defaultParams("agentic"), requests: 300, rate: 4 })),
  );
  const { predict: _flags, ...base } = parseReplayArgs(["--jobs", "1"])!;

  it("predicts with the service's TTL when no options are given, and not as kv_nopredict", () => {
    const kv = runJob(requests, "kv", base);
    expect(kv.predict?.predictedRoutes).toBeGreaterThan(0);
    const plain = runJob(requests, "kv_nopredict", base);
    expect(plain.predict).toBeUndefined();
    expect(plain.summary).not.toEqual(kv.summary);
    // kv_nopredict is kv with the TTL at 0, as before.
    const zero = runJob(requests, "kv", { ...base, predict: { ...SERVICE_PREDICT, ttlMs: 0 } });
    expect(zero.summary).toEqual(plain.summary);
  });
});
