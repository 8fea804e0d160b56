import { describe, expect, it } from "vitest";
import { workerKey } from "../src/protocol/worker.js";
import { startsClosedAfterEach, storedFromRoot, tokens, workers } from "./http-harness.js";

const start = startsClosedAfterEach();

const TOKEN = "t0ken";
const auth = { authorization: `Bearer ${TOKEN}` };

async function service(raw: Record<string, unknown> = {}) {
  return start({ workers: workers(2), server: { authToken: TOKEN }, ...raw });
}

const NEW_WORKER = {
  id: "new-1",
  url: "http://127.0.0.1:9200",
  metrics_url: null,
  dp_size: 2,
  model: "m",
};

describe("GET /v1/workers", () => {
  it("lists every worker with per-rank load, in-flight and stream state", async () => {
    const s = await service({ workers: workers(1, { dpSize: 2 }) });
    const res = await s.app.inject({ method: "GET", url: "/v1/workers" });
    expect(res.statusCode).toBe(200);
    const [w] = res.json().workers;
    expect(w).toMatchObject({
      id: "w0",
      url: "http://127.0.0.1:9100",
      kind: "vllm",
      dp_size: 2,
      metrics_url: null,
    });
    expect(w.ranks.map((r: { key: string }) => r.key)).toEqual(["w0#0", "w0#1"]);
    // Just added, nothing pushed yet: pending (not stale, but not fresh either).
    expect(w.ranks[0].load).toMatchObject({
      state: "pending",
      stale: false,
      source: null,
      running: null,
    });
    expect(w.ranks[0].in_flight).toEqual({
      requests: 0,
      pending_prefill_requests: 0,
      pending_prefill_tokens: 0,
      active_blocks: 0,
    });
    expect(w.ranks[0].stream).toBeNull();
  });
});

describe("mutating worker routes need the bearer token", () => {
  const calls = [
    { method: "POST" as const, url: "/v1/workers", payload: NEW_WORKER },
    { method: "DELETE" as const, url: "/v1/workers/w0" },
    {
      method: "PUT" as const,
      url: "/v1/workers/w0/load",
      payload: { running: 1, waiting: 0, kv_usage: 0 },
    },
  ];
  it.each(calls)("$method $url", async (call) => {
    const s = await service();
    const none = await s.app.inject(call);
    expect(none.statusCode).toBe(401);
    expect(none.json().error).toEqual({
      code: "unauthorized",
      message: "this route needs an Authorization: Bearer <token> header (server.authToken is set)",
    });
    const basic = await s.app.inject({ ...call, headers: { authorization: "Basic abc" } });
    expect(basic.json().error.message).toBe("the Authorization header must be 'Bearer <token>'");
    const wrong = await s.app.inject({ ...call, headers: { authorization: "Bearer nope" } });
    expect(wrong.statusCode).toBe(401);
    expect(wrong.json().error.message).toContain("server.authToken");
    const right = await s.app.inject({ ...call, headers: auth });
    expect(right.statusCode).toBeLessThan(300);
  });

  it("answers 401 before validating the body, params or JSON", async () => {
    const s = await service();
    const bad = [
      { method: "POST" as const, url: "/v1/workers", payload: { url: 5 } },
      { method: "DELETE" as const, url: `/v1/workers/${"x".repeat(65)}` },
      { method: "PUT" as const, url: "/v1/workers/w0/load", payload: { running: "many" } },
      {
        method: "POST" as const,
        url: "/v1/workers",
        headers: { "content-type": "application/json" },
        payload: "{not json",
      },
    ];
    for (const call of bad) {
      const res = await s.app.inject(call);
      expect(res.statusCode, `${call.method} ${call.url}`).toBe(401);
      expect(res.json().error.code).toBe("unauthorized");
    }
  });

  it("leaves them open when no token is configured", async () => {
    const s = await start({ workers: workers(1) });
    const res = await s.app.inject({ method: "DELETE", url: "/v1/workers/w0" });
    expect(res.statusCode).toBe(200);
  });
});

describe("POST /v1/workers", () => {
  it("adds a worker with all its ranks, routable at once", async () => {
    const s = await service();
    const res = await s.app.inject({
      method: "POST",
      url: "/v1/workers",
      headers: auth,
      payload: NEW_WORKER,
    });
    expect(res.statusCode).toBe(201);
    expect(res.json()).toMatchObject({ id: "new-1", dp_size: 2, model: "m", block_size: 16 });
    expect(res.json().ranks.map((r: { key: string }) => r.key)).toEqual(["new-1#0", "new-1#1"]);
    const routed = await s.app.inject({
      method: "POST",
      url: "/v1/route",
      payload: { token_ids: [1, 2, 3], model: "m" },
    });
    expect(routed.statusCode).toBe(200);
    expect(
      routed
        .json()
        .candidates.map((c: { worker: string }) => c.worker)
        .sort(),
    ).toEqual(["new-1#0", "new-1#1", "w0#0", "w1#0"]);
    const dup = await s.app.inject({
      method: "POST",
      url: "/v1/workers",
      headers: auth,
      payload: NEW_WORKER,
    });
    expect(dup.statusCode).toBe(409);
    expect(dup.json().error).toEqual({
      code: "worker_exists",
      message: 'worker "new-1" is already registered',
    });
  });

  it("applies the config file's rules and lists every problem", async () => {
    const s = await service();
    const res = await s.app.inject({
      method: "POST",
      url: "/v1/workers",
      headers: auth,
      payload: {
        id: "x#1",
        url: "ftp://h",
        dp_size: 0,
        events_endpoint: "localhost:5557",
        block_size: 32,
      },
    });
    expect(res.statusCode).toBe(400);
    const { error } = res.json();
    expect(error.code).toBe("invalid_worker");
    expect(error.details.map((d: { path: string }) => d.path)).toEqual([
      "body/id",
      "body/url",
      "body/dp_size",
      "body/events_endpoint",
      "body/block_size",
    ]);
    expect(error.message).toContain('body/url: must be an http(s) URL, got "ftp://h"');
  });

  it("rejects unknown fields and wrong types by schema", async () => {
    const s = await service();
    const unknown = await s.app.inject({
      method: "POST",
      url: "/v1/workers",
      headers: auth,
      payload: { ...NEW_WORKER, eventsEndpoint: "tcp://127.0.0.1:1" },
    });
    expect(unknown.statusCode).toBe(400);
    expect(unknown.json().error.message).toBe("body/eventsEndpoint is not an accepted property");
    const missing = await s.app.inject({
      method: "POST",
      url: "/v1/workers",
      headers: auth,
      payload: { id: "a" },
    });
    expect(missing.json().error.message).toBe("body/url is required");
  });
});

describe("DELETE /v1/workers/:id", () => {
  it("removes every rank, its index entries and its in-flight records", async () => {
    const s = await service({ workers: workers(2, { dpSize: 2 }) });
    s.index.applyEvent(workerKey("w0", 1), storedFromRoot(tokens(32), 16, 7));
    expect(s.index.stats().workerBlocks).toBe(2);
    const res = await s.app.inject({ method: "DELETE", url: "/v1/workers/w0", headers: auth });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ id: "w0", removed: true });
    expect(s.index.stats().workerBlocks).toBe(0);
    const list = await s.app.inject({ method: "GET", url: "/v1/workers" });
    expect(list.json().workers.map((w: { id: string }) => w.id)).toEqual(["w1"]);
    const again = await s.app.inject({ method: "DELETE", url: "/v1/workers/w0", headers: auth });
    expect(again.statusCode).toBe(404);
    expect(again.json().error).toEqual({ code: "worker_not_found", message: 'no worker "w0"' });
  });
});

describe("DELETE then POST /v1/workers: a worker added again", () => {
  it("is not credited with the blocks predicted for its previous registration", async () => {
    let now = 1_000;
    const s = await start(
      { workers: workers(2), server: { authToken: TOKEN } },
      { nowMs: () => now },
    );
    const prompt = tokens(64);
    const route = async (id: string) => {
      const res = await s.app.inject({
        method: "POST",
        url: "/v1/route",
        payload: { token_ids: prompt, request_id: id },
      });
      expect(res.statusCode).toBe(200);
      return res.json();
    };
    const first = await route("r1");
    const { id, key } = first.worker;
    now += 10;
    await s.app.inject({ method: "POST", url: "/v1/requests/r1/done", payload: {} });
    const gone = await s.app.inject({ method: "DELETE", url: `/v1/workers/${id}`, headers: auth });
    expect(gone.statusCode).toBe(200);
    // A new engine (empty cache) registered under the same id, within the prediction's TTL.
    const back = await s.app.inject({
      method: "POST",
      url: "/v1/workers",
      headers: auth,
      payload: { id, url: first.worker.url, metrics_url: null },
    });
    expect(back.statusCode).toBeLessThan(300);
    now += 10;
    const again = await route("r2");
    const c = again.candidates.find((x: { worker: string }) => x.worker === key);
    expect(c).toMatchObject({
      predicted_blocks: 0,
      reported_blocks: 0,
      overlap_blocks: { gpu: 0 },
    });
  });
});

describe("PUT /v1/workers/:id/load", () => {
  it("records pushed load per rank", async () => {
    const s = await service({ workers: workers(1, { dpSize: 2 }) });
    const res = await s.app.inject({
      method: "PUT",
      url: "/v1/workers/w0/load",
      headers: auth,
      payload: { dp_rank: 1, running: 3, waiting: 2, kv_usage: 0.5, num_gpu_blocks: 1000 },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().worker).toBe("w0#1");
    expect(res.json().load).toMatchObject({
      state: "fresh",
      source: "push",
      running: 3,
      waiting: 2,
      kv_usage: 0.5,
    });
  });

  it.each([
    [{ running: 1, waiting: 0, kv_usage: 1.5 }, 400, "body/kv_usage must be <= 1 (got 1.5)"],
    [{ running: -1, waiting: 0, kv_usage: 0 }, 400, "body/running must be >= 0 (got -1)"],
    [{ running: 1, kv_usage: 0 }, 400, "body/waiting is required"],
    [
      { running: 1, waiting: 0, kv_usage: 0, dp_rank: 1 },
      400,
      "body/dp_rank is 1 but worker w0 has dp_size 1 (ranks 0..0)",
    ],
  ])("%j → %i", async (payload, status, message) => {
    const s = await service({ workers: workers(1) });
    const res = await s.app.inject({
      method: "PUT",
      url: "/v1/workers/w0/load",
      headers: auth,
      payload,
    });
    expect(res.statusCode).toBe(status);
    expect(res.json().error.code).toBe("invalid_request");
    expect(res.json().error.message).toBe(message);
  });

  it("404s an unknown worker", async () => {
    const s = await service();
    const res = await s.app.inject({
      method: "PUT",
      url: "/v1/workers/ghost/load",
      headers: auth,
      payload: { running: 0, waiting: 0, kv_usage: 0 },
    });
    expect(res.statusCode).toBe(404);
    expect(res.json().error.code).toBe("worker_not_found");
  });
});
