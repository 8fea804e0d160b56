import { describe, expect, it } from "vitest";
import { workerKey } from "../src/protocol/worker.js";
import {
  startsClosedAfterEach,
  storedFromRoot,
  type TestService,
  tokens,
  workers,
} from "./http-harness.js";

const start = startsClosedAfterEach();

async function service(raw: Record<string, unknown> = {}) {
  return start({ workers: workers(3), ...raw });
}

async function pushLoad(
  s: TestService,
  id: string,
  load = { running: 0, waiting: 0, kv_usage: 0.1 },
) {
  const res = await s.app.inject({ method: "PUT", url: `/v1/workers/${id}/load`, payload: load });
  expect(res.statusCode).toBe(200);
}

const post = (s: TestService, url: string, payload: unknown) =>
  s.app.inject({ method: "POST", url, payload: payload as object });

describe("POST /v1/route", () => {
  it("chooses the worker holding the prefix and explains every candidate", async () => {
    const s = await service();
    for (const id of ["w0", "w1", "w2"]) await pushLoad(s, id);
    const prompt = tokens(64);
    s.index.applyEvent(workerKey("w1"), storedFromRoot(prompt.slice(0, 48), 16, 1000));
    const res = await post(s, "/v1/route", { token_ids: prompt, request_id: "r1" });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.request_id).toBe("r1");
    expect(body.worker).toEqual({
      id: "w1",
      rank: 0,
      key: "w1#0",
      url: "http://127.0.0.1:9101",
      model: null,
    });
    expect(body.overlap_blocks).toBe(3);
    expect(body.cached_tokens).toBe(48);
    expect(body.prompt_tokens).toBe(64);
    expect(body.prompt_blocks).toBe(4);
    expect(body.reason).toBe("lowest_cost");
    expect(body.candidates).toHaveLength(3);
    const c1 = body.candidates.find((c: { worker: string }) => c.worker === "w1#0");
    expect(c1.overlap_blocks).toEqual({ gpu: 3, host: 3, disk: 3, store: 0 });
    expect(c1.excluded).toBeNull();
    expect(Object.keys(c1.cost).sort()).toEqual([
      "decode",
      "prefill",
      "queue",
      "stale_penalty",
      "total",
    ]);
    const c0 = body.candidates.find((c: { worker: string }) => c.worker === "w0#0");
    expect(c0.cost.prefill).toBeGreaterThan(c1.cost.prefill);
    expect(Object.keys(body.timings_ms).sort()).toEqual(["hashing", "matching", "scoring"]);
  });

  it("answers 409 for a request id already in flight, and 503 for an unserved model", async () => {
    const s = await service({ workers: workers(2, { model: "m" }) });
    await pushLoad(s, "w0");
    expect((await post(s, "/v1/route", { token_ids: [1, 2], request_id: "x" })).statusCode).toBe(
      200,
    );
    const dup = await post(s, "/v1/route", { token_ids: [1, 2], request_id: "x" });
    expect(dup.statusCode).toBe(409);
    expect(dup.json().error.code).toBe("duplicate_request");
    const other = await post(s, "/v1/route", { token_ids: [1], model: "not-served" });
    expect(other.statusCode).toBe(503);
    expect(other.json().error).toMatchObject({ code: "no_worker_available" });
    expect(other.json().error.message).toContain("not-served");
  });

  it("answers 503 no_worker_available with an empty fleet", async () => {
    const s = await service({ workers: [] });
    const res = await post(s, "/v1/route", { token_ids: [1, 2, 3] });
    expect(res.statusCode).toBe(503);
    expect(res.json().error.code).toBe("no_worker_available");
  });

  it("applies per-request overrides and rejects out-of-range ones", async () => {
    const s = await service();
    await pushLoad(s, "w0");
    const ok = await post(s, "/v1/route", { token_ids: [1, 2], overrides: { temperature: 2 } });
    expect(ok.statusCode).toBe(200);
    expect(ok.json().temperature).toBe(2);
    const bad = await post(s, "/v1/route", { token_ids: [1, 2], overrides: { host: 3 } });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.code).toBe("invalid_request");
    expect(bad.json().error.message).toContain("host");
  });
});

describe("POST /v1/route and /v1/match: every 4xx says what is wrong", () => {
  const cases: [string, unknown, number, string, string][] = [
    ["missing token_ids", {}, 400, "invalid_request", "body/token_ids is required"],
    [
      "token_ids not a list",
      { token_ids: "1 2 3" },
      400,
      "invalid_request",
      "body/token_ids must be array",
    ],
    [
      "negative token",
      { token_ids: [1, -5] },
      400,
      "invalid_request",
      "body/token_ids/1 must be >= 0 (got -5)",
    ],
    [
      "fractional token",
      { token_ids: [1.5] },
      400,
      "invalid_request",
      "body/token_ids/0 must be integer (got 1.5)",
    ],
    [
      "string token",
      { token_ids: ["5"] },
      400,
      "invalid_request",
      'body/token_ids/0 must be integer (got "5")',
    ],
    [
      "token above max",
      { token_ids: [2 ** 30] },
      400,
      "invalid_request",
      "body/token_ids/0 must be <= 1000",
    ],
    [
      "too many tokens",
      { token_ids: tokens(65) },
      400,
      "prompt_too_long",
      "token_ids has 65 tokens; the limit is 64",
    ],
    [
      "unknown property",
      { token_ids: [1], prompt: "hi" },
      400,
      "invalid_request",
      "body/prompt is not an accepted property",
    ],
    [
      "empty model",
      { token_ids: [1], model: "" },
      400,
      "invalid_request",
      "body/model must NOT have fewer than 1 characters",
    ],
    ["body not an object", [1, 2], 400, "invalid_request", "body must be object"],
  ];
  for (const url of ["/v1/route", "/v1/match"]) {
    it.each(cases)(`${url}: %s`, async (_name, payload, status, code, message) => {
      const s = await service({ server: { maxPromptTokens: 64, maxTokenId: 1000 } });
      const res = await post(s, url, payload);
      expect(res.statusCode).toBe(status);
      expect(res.json().error.code).toBe(code);
      expect(res.json().error.message).toContain(message);
    });
  }

  it("rejects invalid JSON, empty bodies, other media types and oversized bodies", async () => {
    const s = await service({ server: { bodyLimitBytes: 2048 } });
    const json = { "content-type": "application/json" };
    const bad = await s.app.inject({
      method: "POST",
      url: "/v1/route",
      headers: json,
      payload: '{"token_ids": [1,',
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.code).toBe("invalid_json");
    const empty = await s.app.inject({
      method: "POST",
      url: "/v1/route",
      headers: json,
      payload: "",
    });
    expect(empty.statusCode).toBe(400);
    expect(empty.json().error.code).toBe("invalid_json");
    const text = await s.app.inject({
      method: "POST",
      url: "/v1/route",
      headers: { "content-type": "text/plain" },
      payload: "1 2 3",
    });
    expect(text.statusCode).toBe(415);
    expect(text.json().error).toMatchObject({ code: "unsupported_media_type" });
    const big = await post(s, "/v1/route", { token_ids: tokens(1000) });
    expect(big.statusCode).toBe(413);
    expect(big.json().error).toEqual({
      code: "body_too_large",
      message: "request body exceeds 2048 bytes (server.bodyLimitBytes)",
    });
  });

  it("answers 404 not_found for unknown routes", async () => {
    const s = await service();
    const res = await s.app.inject({ method: "GET", url: "/v1/nothing?x=1" });
    expect(res.statusCode).toBe(404);
    expect(res.json().error).toEqual({ code: "not_found", message: "no route GET /v1/nothing" });
  });
});

describe("POST /v1/match", () => {
  it("reports overlap per worker and tier without recording anything", async () => {
    const s = await service();
    const prompt = tokens(40);
    s.index.applyEvent(workerKey("w2"), storedFromRoot(prompt, 16, 50));
    const res = await post(s, "/v1/match", { token_ids: prompt });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({
      prompt_tokens: 40,
      prompt_blocks: 2,
      block_size: 16,
      store_blocks: 0,
    });
    expect(
      body.workers.map((w: { worker: string; cached_tokens: number }) => [
        w.worker,
        w.cached_tokens,
      ]),
    ).toEqual([
      ["w0#0", 0],
      ["w1#0", 0],
      ["w2#0", 32],
    ]);
    const workersRes = await s.app.inject({ method: "GET", url: "/v1/workers" });
    for (const w of workersRes.json().workers) expect(w.ranks[0].in_flight.requests).toBe(0);
  });

  it("separates LoRA adapters", async () => {
    const s = await service();
    const prompt = tokens(32);
    s.index.applyEvent(workerKey("w0"), storedFromRoot(prompt, 16, 1));
    const res = await post(s, "/v1/match", { token_ids: prompt, lora_name: "adapter-a" });
    expect(res.json().workers[0].overlap_blocks.gpu).toBe(0);
  });
});

describe("request lifecycle", () => {
  it("tracks first-token and done, and 404s unknown ids", async () => {
    const s = await service();
    await pushLoad(s, "w0");
    const routed = await post(s, "/v1/route", { token_ids: tokens(32), request_id: "req-7" });
    const worker = routed.json().worker.key;
    const inFlight = async () =>
      (await s.app.inject({ method: "GET", url: "/v1/workers" }))
        .json()
        .workers.flatMap((w: { ranks: { key: string; in_flight: unknown }[] }) => w.ranks)
        .find((r: { key: string }) => r.key === worker).in_flight;
    expect(await inFlight()).toMatchObject({ requests: 1, pending_prefill_requests: 1 });
    const first = await post(s, "/v1/requests/req-7/first-token", {});
    expect(first.statusCode).toBe(200);
    expect(first.json()).toEqual({ request_id: "req-7", worker, event: "first_token" });
    expect(await inFlight()).toMatchObject({ requests: 1, pending_prefill_requests: 0 });
    expect((await post(s, "/v1/requests/req-7/done", {})).statusCode).toBe(200);
    expect(await inFlight()).toMatchObject({ requests: 0 });
    for (const event of ["done", "first-token"]) {
      const again = await post(s, `/v1/requests/req-7/${event}`, {});
      expect(again.statusCode).toBe(404);
      expect(again.json().error.code).toBe("request_not_found");
      expect(again.json().error.message).toContain('"req-7"');
    }
  });

  it("applies in-flight TTLs to reused ids, reports, /v1/workers and /metrics, not only routes", async () => {
    let now = 1_000_000;
    const svc = await start(
      { workers: workers(1), inFlight: { ttlMs: 60_000, prefillTtlMs: 10_000 } },
      { nowMs: () => now },
    );
    const s = svc;
    await pushLoad(s, "w0");
    for (const id of ["a", "b"]) {
      expect(
        (await post(s, "/v1/route", { token_ids: tokens(8), request_id: id })).statusCode,
      ).toBe(200);
    }
    const inFlight = async () =>
      (await s.app.inject({ method: "GET", url: "/v1/workers" })).json().workers[0].ranks[0]
        .in_flight.requests;
    const gauge = async () => {
      const text = (await s.app.inject({ method: "GET", url: "/metrics" })).body;
      const line = text.split("\n").find((l) => l.startsWith("kvrouter_inflight_requests{"));
      return line === undefined ? 0 : Number(line.split(" ")[1]);
    };
    expect(await inFlight()).toBe(2);
    expect(await gauge()).toBe(2);
    now += 60_000; // both TTLs have run out; nothing was routed since
    expect(await gauge()).toBe(0);
    expect(await inFlight()).toBe(0);
    now += 60_000;
    await post(s, "/v1/route", { token_ids: tokens(8), request_id: "c" });
    now += 60_000;
    const late = await post(s, "/v1/requests/c/done", {});
    expect(late.statusCode).toBe(404);
    await post(s, "/v1/route", { token_ids: tokens(8), request_id: "d" });
    now += 60_000;
    // The id of an expired request can be reused (docs/http-api.md).
    const reused = await post(s, "/v1/route", { token_ids: tokens(8), request_id: "d" });
    expect(reused.statusCode).toBe(200);
  });

  it("failed: ends the request and takes back the blocks predicted for it; done does not", async () => {
    const s = await service();
    await pushLoad(s, "w0");
    const predictedOn = async (prompt: number[], id: string, worker: string) => {
      const res = await post(s, "/v1/route", { token_ids: prompt, request_id: id });
      return res.json().candidates.find((c: { worker: string }) => c.worker === worker)
        .predicted_blocks;
    };
    const failedPrompt = tokens(32);
    const routed = await post(s, "/v1/route", { token_ids: failedPrompt, request_id: "f-1" });
    const worker = routed.json().worker.key;
    const failed = await post(s, "/v1/requests/f-1/failed", {});
    expect(failed.statusCode).toBe(200);
    expect(failed.json()).toEqual({ request_id: "f-1", worker, event: "failed" });
    expect(await predictedOn(failedPrompt, "f-2", worker)).toBe(0);
    const metrics = (await s.app.inject({ method: "GET", url: "/metrics" })).body;
    expect(metrics).toContain("kvrouter_predicted_blocks_withdrawn_total 2");
    // The same with `done`: the prediction stays for its TTL.
    const donePrompt = tokens(32).map((t) => t + 1_000);
    const other = await post(s, "/v1/route", { token_ids: donePrompt, request_id: "g-1" });
    expect((await post(s, "/v1/requests/g-1/done", {})).statusCode).toBe(200);
    expect(await predictedOn(donePrompt, "g-2", other.json().worker.key)).toBe(2);
    const again = await post(s, "/v1/requests/f-1/failed", {});
    expect(again.statusCode).toBe(404);
    expect(again.json().error.code).toBe("request_not_found");
  });

  it("accepts lifecycle calls without a body", async () => {
    const s = await service();
    const res = await s.app.inject({ method: "POST", url: "/v1/requests/nope/done" });
    expect(res.statusCode).toBe(404);
    expect(res.json().error.code).toBe("request_not_found");
  });

  it("accepts an empty body sent with content-type: application/json (curl -X POST -H …)", async () => {
    const s = await service();
    await pushLoad(s, "w0");
    await post(s, "/v1/route", { token_ids: tokens(8), request_id: "e-1" });
    const json = { "content-type": "application/json" };
    for (const event of ["first-token", "done"]) {
      const res = await s.app.inject({
        method: "POST",
        url: `/v1/requests/e-1/${event}`,
        headers: json,
        payload: "",
      });
      expect(res.statusCode, event).toBe(200);
    }
    // A body that is there must still be JSON.
    const bad = await s.app.inject({
      method: "POST",
      url: "/v1/requests/e-1/done",
      headers: json,
      payload: "{",
    });
    expect(bad.json().error.code).toBe("invalid_json");
  });
});
