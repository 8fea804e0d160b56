import { describe, expect, it } from "vitest";
import { startsClosedAfterEach, workers } from "./http-harness.js";

const start = startsClosedAfterEach();

describe("health and readiness", () => {
  it("is alive as soon as it is built", async () => {
    const svc = await start();
    const res = await svc.app.inject({ method: "GET", url: "/healthz" });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: "ok" });
  });

  it("is not ready without workers", async () => {
    const svc = await start({ workers: [] });
    const res = await svc.app.inject({ method: "GET", url: "/readyz" });
    expect(res.statusCode).toBe(503);
    expect(res.json().error).toEqual({
      code: "not_ready",
      message: "no routable worker is registered (add one to workers)",
    });
  });

  it("becomes ready once a worker has fresh load, and not ready again when it goes stale", async () => {
    let now = 1_000_000;
    const svc = await start(
      { workers: workers(2), load: { staleAfterMs: 5000 } },
      { nowMs: () => now },
    );
    const s = svc;
    const before = await s.app.inject({ method: "GET", url: "/readyz" });
    expect(before.statusCode).toBe(503);
    expect(before.json().error.message).toContain("none of 2 workers has fresh load information");
    expect(before.json().error.details.workers).toEqual([
      { worker: "w0#0", state: "no_load_yet" },
      { worker: "w1#0", state: "no_load_yet" },
    ]);
    const push = await s.app.inject({
      method: "PUT",
      url: "/v1/workers/w1/load",
      payload: { running: 0, waiting: 0, kv_usage: 0 },
    });
    expect(push.statusCode).toBe(200);
    const after = await s.app.inject({ method: "GET", url: "/readyz" });
    expect(after.statusCode).toBe(200);
    expect(after.json()).toEqual({ status: "ready", fresh_workers: 1, workers: 2 });
    now += 5000;
    const stale = await s.app.inject({ method: "GET", url: "/readyz" });
    expect(stale.statusCode).toBe(503);
    expect(stale.json().error.details.workers).toEqual([
      { worker: "w0#0", state: "no_load_yet" },
      { worker: "w1#0", state: "stale" },
    ]);
  });
});
