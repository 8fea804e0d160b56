/**
 * The edge cases a platform team hits first, one test each, against the real service:
 * degenerate prompts, adapters, unknown models and ids, reused request ids, malformed
 * bodies, limits, media types and wrong methods. Each answer must say what was wrong.
 */

import { describe, expect, it } from "vitest";
import type { BlockStoredEvent } from "../src/protocol/events.js";
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
  const svc = await start({ workers: workers(3), ...raw });
  for (const [i, id] of ["w0", "w1", "w2"].entries()) {
    // w0 is the least loaded, so a prompt nobody caches goes there.
    await svc.app.inject({
      method: "PUT",
      url: `/v1/workers/${id}/load`,
      payload: { running: i, waiting: i, kv_usage: 0.1 * (i + 1) },
    });
  }
  return svc;
}

const post = (s: TestService, url: string, payload?: unknown) =>
  s.app.inject({
    method: "POST",
    url,
    ...(payload === undefined ? {} : { payload: payload as object }),
  });

describe("prompts", () => {
  it("rejects an empty token_ids with a 400 that says so (route and match)", async () => {
    const s = await service();
    for (const url of ["/v1/route", "/v1/match"]) {
      const res = await post(s, url, { token_ids: [] });
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toMatchObject({
        code: "invalid_request",
        message: "body/token_ids is empty: a prompt needs at least one token id",
      });
    }
  });

  it("routes a prompt shorter than one block on load alone", async () => {
    const s = await service();
    const res = await post(s, "/v1/route", { token_ids: [5, 6, 7] });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toBe("application/json; charset=utf-8");
    expect(res.json()).toMatchObject({
      worker: { key: "w0#0" },
      prompt_tokens: 3,
      prompt_blocks: 0,
      overlap_blocks: 0,
      cached_tokens: 0,
      prefill_tokens: 3,
    });
    const match = await post(s, "/v1/match", { token_ids: [5, 6, 7] });
    expect(match.json()).toMatchObject({ prompt_tokens: 3, prompt_blocks: 0 });
  });

  it("keeps a LoRA adapter's cache apart from the base model's", async () => {
    const s = await service();
    const prompt = tokens(256, 300);
    const lora: BlockStoredEvent = {
      ...storedFromRoot(prompt, 16, 500),
      loraId: 7,
      loraName: "adapter-a",
    };
    s.index.applyEvent(workerKey("w2"), lora);
    s.index.applyEvent(workerKey("w1"), storedFromRoot(prompt, 16, 900));
    const withLora = await post(s, "/v1/route", { token_ids: prompt, lora_name: "adapter-a" });
    expect(withLora.statusCode).toBe(200);
    expect(withLora.json()).toMatchObject({ worker: { key: "w2#0" }, overlap_blocks: 16 });
    const base = await post(s, "/v1/route", { token_ids: prompt, lora_name: null });
    expect(base.json()).toMatchObject({ worker: { key: "w1#0" }, overlap_blocks: 16 });
    const other = await post(s, "/v1/route", { token_ids: prompt, lora_name: "adapter-b" });
    expect(other.json()).toMatchObject({ worker: { key: "w0#0" }, overlap_blocks: 0 });
  });
});

describe("models and ids", () => {
  it("answers 503 no_worker_available naming the model nobody serves", async () => {
    const s = await service({ workers: workers(2, { model: "llama" }) });
    const res = await post(s, "/v1/route", { token_ids: [1, 2], model: "mistral" });
    expect(res.statusCode).toBe(503);
    expect(res.json().error).toEqual({
      code: "no_worker_available",
      message: "no registered worker serves model mistral",
      details: { reason: "no_workers_for_model" },
    });
    const served = await post(s, "/v1/route", { token_ids: [1, 2], model: "llama" });
    expect(served.statusCode).toBe(200);
  });

  it("refuses a request_id while it is in flight and accepts it again once done", async () => {
    const s = await service();
    const first = await post(s, "/v1/route", { token_ids: [1, 2], request_id: "r-1" });
    expect(first.statusCode).toBe(200);
    const again = await post(s, "/v1/route", { token_ids: [3, 4], request_id: "r-1" });
    expect(again.statusCode).toBe(409);
    expect(again.json().error).toMatchObject({
      code: "duplicate_request",
      message: "request id r-1 is already in flight",
    });
    expect((await post(s, "/v1/requests/r-1/done")).statusCode).toBe(200);
    const reused = await post(s, "/v1/route", { token_ids: [3, 4], request_id: "r-1" });
    expect(reused.statusCode).toBe(200);
    expect(reused.json().request_id).toBe("r-1");
  });

  it("answers 404 for lifecycle calls and deletes of unknown ids", async () => {
    const s = await service();
    for (const event of ["first-token", "done"]) {
      const res = await post(s, `/v1/requests/never-routed/${event}`, {});
      expect(res.statusCode).toBe(404);
      expect(res.json().error.code).toBe("request_not_found");
      expect(res.json().error.message).toContain('"never-routed"');
    }
    const del = await s.app.inject({ method: "DELETE", url: "/v1/workers/nobody" });
    expect(del.statusCode).toBe(404);
    expect(del.json().error).toEqual({ code: "worker_not_found", message: 'no worker "nobody"' });
  });
});

describe("malformed requests", () => {
  it("names the bad field of POST /v1/workers", async () => {
    const s = await service();
    const add = (payload: unknown) => post(s, "/v1/workers", payload);
    const badType = await add({ id: "x", url: "http://127.0.0.1:9300", dp_size: "2" });
    expect(badType.statusCode).toBe(400);
    expect(badType.json().error.message).toBe('body/dp_size must be integer (got "2")');
    const missing = await add({ url: "http://127.0.0.1:9300" });
    expect(missing.json().error.message).toBe("body/id is required");
    const badUrl = await add({ id: "x", url: "not a url" });
    expect(badUrl.statusCode).toBe(400);
    expect(badUrl.json().error.code).toBe("invalid_worker");
    expect(badUrl.json().error.details[0].path).toBe("body/url");
  });

  it("rejects model, lora_name and request_id names longer than 256 characters", async () => {
    const s = await service();
    const long = "m".repeat(257);
    const cases: [string, Record<string, unknown>, string][] = [
      ["/v1/route", { token_ids: [1], model: long }, "body/model"],
      ["/v1/match", { token_ids: [1], model: long }, "body/model"],
      ["/v1/route", { token_ids: [1], lora_name: long }, "body/lora_name"],
      ["/v1/route", { token_ids: [1], request_id: long }, "body/request_id"],
    ];
    for (const [url, payload, path] of cases) {
      const res = await post(s, url, payload);
      expect(res.statusCode, path).toBe(400);
      expect(res.json().error.message, path).toContain(path);
    }
    const fits = await post(s, "/v1/route", { token_ids: [1], lora_name: "a".repeat(256) });
    expect(fits.statusCode).toBe(200);
  });

  it("rejects __proto__ and constructor keys by schema, naming them", async () => {
    const s = await service();
    const json = { "content-type": "application/json" };
    // Values one level deep: deeper ones are refused earlier as json_too_deep.
    const cases: [string, string, string][] = [
      ["/v1/route", '{"token_ids":[1],"__proto__":{"x":1}}', "body/__proto__"],
      ["/v1/match", '{"token_ids":[1],"constructor":{"prototype":1}}', "body/constructor"],
      ["/v1/route", '{"token_ids":[1],"overrides":{"__proto__":9}}', "body/overrides/__proto__"],
      ["/v1/workers", '{"id":"p","url":"http://127.0.0.1:9301","__proto__":"x"}', "body/__proto__"],
    ];
    for (const [url, payload, path] of cases) {
      const res = await s.app.inject({ method: "POST", url, headers: json, payload });
      expect(res.statusCode, payload).toBe(400);
      expect(res.json().error.message).toBe(`${path} is not an accepted property`);
    }
  });

  it("answers 413 above the body limit and 415 for anything but JSON", async () => {
    const s = await service({ server: { bodyLimitBytes: 1024 } });
    const big = await post(s, "/v1/route", { token_ids: tokens(400) });
    expect(big.statusCode).toBe(413);
    expect(big.json().error.code).toBe("body_too_large");
    for (const type of ["text/plain", "application/x-www-form-urlencoded", "application/xml"]) {
      const res = await s.app.inject({
        method: "POST",
        url: "/v1/route",
        headers: { "content-type": type },
        payload: "token_ids=1",
      });
      expect(res.statusCode, type).toBe(415);
      expect(res.json().error.message).toContain(type);
    }
    const charset = await s.app.inject({
      method: "POST",
      url: "/v1/route",
      headers: { "content-type": "application/json; charset=utf-8" },
      payload: '{"token_ids":[1,2]}',
    });
    expect(charset.statusCode).toBe(200);
  });

  it("answers 405 with Allow for a known path and another method; 404 for unknown paths", async () => {
    const s = await service();
    const get = await s.app.inject({ method: "GET", url: "/v1/route" });
    expect(get.statusCode).toBe(405);
    expect(get.headers.allow).toBe("POST");
    expect(get.json().error).toEqual({
      code: "method_not_allowed",
      message: "GET is not allowed on /v1/route; allowed: POST",
    });
    const put = await s.app.inject({ method: "PUT", url: "/v1/workers/w0?x=1" });
    expect(put.statusCode).toBe(405);
    expect(put.headers.allow).toBe("DELETE, GET, HEAD");
    const postLoad = await s.app.inject({ method: "POST", url: "/v1/workers/w0/load" });
    expect(postLoad.headers.allow).toBe("PUT");
    const workersList = await s.app.inject({ method: "DELETE", url: "/v1/workers" });
    expect(workersList.statusCode).toBe(405);
    expect(workersList.headers.allow).toContain("GET");
    expect(workersList.headers.allow).toContain("POST");
    const unknown = await s.app.inject({ method: "GET", url: "/v1/routes" });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.headers.allow).toBeUndefined();
    const slash = await s.app.inject({ method: "POST", url: "/v1/route/" });
    expect(slash.statusCode).toBe(404);
  });
});
