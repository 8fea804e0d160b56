import { describe, expect, it } from "vitest";
import { workerKey } from "../src/protocol/worker.js";
import { startsClosedAfterEach, storedFromRoot, tokens, workers } from "./http-harness.js";

const start = startsClosedAfterEach();

async function service(raw: Record<string, unknown> = {}, nowMs?: () => number) {
  const s = await start({ workers: workers(2, { model: "m" }), ...raw }, { nowMs });
  return s;
}

/** The value of one exposition line, e.g. `name{a="b"}`; undefined when absent. */
function sample(text: string, series: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe("GET /metrics", () => {
  it("exposes routing, index, load, in-flight and process metrics from live state", async () => {
    let now = 50_000;
    const s = await service({}, () => now);
    const prompt = tokens(64);
    s.index.applyEvent(workerKey("w1"), storedFromRoot(prompt.slice(0, 48), 16, 1));
    s.index.applyEvent(workerKey("w1"), {
      type: "removed",
      blockHashes: [],
      medium: null,
      tier: "gpu",
    });
    for (const [id, running] of [
      ["w0", 2],
      ["w1", 0],
    ] as const) {
      await s.app.inject({
        method: "PUT",
        url: `/v1/workers/${id}/load`,
        payload: { running, waiting: 1, kv_usage: 0.25 },
      });
    }
    now += 1500;
    const routed = await s.app.inject({
      method: "POST",
      url: "/v1/route",
      payload: { token_ids: prompt },
    });
    expect(routed.json().worker.key).toBe("w1#0");
    const failed = await s.app.inject({
      method: "POST",
      url: "/v1/route",
      payload: { token_ids: prompt, model: "other" },
    });
    expect(failed.statusCode).toBe(503);

    const res = await s.app.inject({ method: "GET", url: "/metrics" });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toContain("text/plain");
    const text = res.body;
    expect(sample(text, 'kvrouter_route_decisions_total{worker="w1#0",reason="lowest_cost"}')).toBe(
      1,
    );
    expect(sample(text, 'kvrouter_route_failures_total{code="no_worker_available"}')).toBe(1);
    for (const phase of ["hashing", "matching", "scoring", "total"]) {
      expect(sample(text, `kvrouter_route_duration_seconds_count{phase="${phase}"}`)).toBe(1);
    }
    expect(sample(text, "kvrouter_route_overlap_ratio_count")).toBe(1);
    expect(sample(text, "kvrouter_route_overlap_ratio_sum")).toBe(0.75);
    expect(sample(text, 'kvrouter_events_applied_total{type="stored",status="applied"}')).toBe(1);
    expect(sample(text, "kvrouter_index_blocks")).toBe(3);
    expect(sample(text, "kvrouter_index_workers")).toBe(1);
    expect(sample(text, "kvrouter_index_nodes")).toBeGreaterThan(0);
    expect(sample(text, 'kvrouter_load_running_requests{worker="w0#0"}')).toBe(2);
    expect(sample(text, 'kvrouter_load_waiting_requests{worker="w1#0"}')).toBe(1);
    expect(sample(text, 'kvrouter_load_kv_usage_ratio{worker="w1#0"}')).toBe(0.25);
    expect(sample(text, 'kvrouter_load_staleness_seconds{worker="w0#0"}')).toBe(1.5);
    expect(sample(text, 'kvrouter_load_stale{worker="w0#0"}')).toBe(0);
    expect(sample(text, 'kvrouter_load_scrape_errors_total{worker="w0#0"}')).toBe(0);
    expect(sample(text, 'kvrouter_inflight_requests{worker="w1#0"}')).toBe(1);
    expect(text).toContain("# TYPE kvrouter_route_decisions_total counter");
    expect(text).toContain("# TYPE kvrouter_route_duration_seconds histogram");
    expect(sample(text, "process_cpu_user_seconds_total")).toBeGreaterThan(0);
    expect(text).toContain("nodejs_eventloop_lag_seconds");
  });

  it("counts a worker reset for holding more GPU blocks than its engine reports", async () => {
    const s = await service();
    // The engine reports 2 GPU blocks; the service's upkeep loop passes that to the index.
    await s.app.inject({
      method: "PUT",
      url: "/v1/workers/w0/load",
      payload: { running: 0, waiting: 0, kv_usage: 0.5, num_gpu_blocks: 2 },
    });
    const prompt = tokens(48);
    for (let i = 0; i < 100 && s.index.stats().overflowResets === 0; i++) {
      s.index.applyEvent(workerKey("w0"), storedFromRoot(prompt, 16, 1000 * i));
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const text = (await s.app.inject({ method: "GET", url: "/metrics" })).body;
    expect(sample(text, "kvrouter_index_overflow_resets_total")).toBeGreaterThanOrEqual(1);
    expect(sample(text, "kvrouter_index_cap_evictions_total")).toBe(0);
    expect(sample(text, "kvrouter_index_reclaim_pending_blocks")).toBeGreaterThanOrEqual(0);
    expect(text).toContain("# TYPE kvrouter_index_overflow_resets_total counter");
  });

  it("drops a removed worker's series and gives each app its own registry", async () => {
    const a = await service();
    const b = await service();
    await a.app.inject({ method: "DELETE", url: "/v1/workers/w0" });
    const ta = (await a.app.inject({ method: "GET", url: "/metrics" })).body;
    const tb = (await b.app.inject({ method: "GET", url: "/metrics" })).body;
    expect(ta).not.toContain('worker="w0#0"');
    expect(sample(tb, 'kvrouter_load_stale{worker="w0#0"}')).toBe(0);
  });
});

describe("logs", () => {
  it("writes JSON records, no per-request lines, and logs fleet changes", async () => {
    const s = await service();
    for (let i = 0; i < 3; i++) {
      await s.app.inject({ method: "POST", url: "/v1/route", payload: { token_ids: [1, 2, 3] } });
    }
    await s.app.inject({ method: "DELETE", url: "/v1/workers/w1" });
    expect(s.logs.some((r) => "req" in r || "res" in r)).toBe(false);
    const removed = s.logs.find((r) => r.msg === "worker removed");
    expect(removed).toMatchObject({ level: 30, worker: "w1", service: "kvrouter" });
  });
});
