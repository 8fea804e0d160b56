/**
 * What a first-time caller of the HTTP API meets: text where token ids belong gets a hint
 * (tokenize first, or use OpenAI routes), one worker can be read by id, an invalid JSON
 * body is described once, and with `server.onAllStale: reject` a decision over workers
 * whose load is all stale is a 503 (and records nothing in flight) instead of a worker
 * that may be down.
 */

import { describe, expect, it } from "vitest";
import { startsClosedAfterEach, workers } from "./http-harness.js";

const json = { "content-type": "application/json" };
const start = startsClosedAfterEach();
/** The service's clock; tests move it past load.staleAfterMs (5 s) to make load stale. */
let now = 1_000_000;
const clock = { nowMs: () => now };

describe("HTTP API papercuts", () => {
  it.each([
    ["/v1/route", { prompt: "hello" }],
    ["/v1/route", { messages: [{ role: "user", content: "hello" }] }],
    ["/v1/match", { prompt: "hello" }],
  ])("%s with text instead of token ids says what to do", async (url, payload) => {
    const s = await start({ workers: workers(2) });
    const res = await s.app.inject({ method: "POST", url, headers: json, payload });
    expect(res.statusCode).toBe(400);
    const { error } = res.json();
    expect(error.code).toBe("invalid_request");
    expect(error.message).toMatch(/^body\/token_ids is required/);
    expect(error.message).toContain("tokenize the prompt with the model's tokenizer");
    expect(error.message).toContain("/v1/completions");
  });

  it("GET /v1/workers/:id returns that worker, 404 for an unknown id", async () => {
    const s = await start({ workers: workers(2) });
    const one = await s.app.inject({ method: "GET", url: "/v1/workers/w1" });
    expect(one.statusCode).toBe(200);
    const all = await s.app.inject({ method: "GET", url: "/v1/workers" });
    expect(one.json()).toEqual(all.json().workers[1]);
    expect(one.json().id).toBe("w1");
    const none = await s.app.inject({ method: "GET", url: "/v1/workers/nope" });
    expect(none.statusCode).toBe(404);
    expect(none.json().error.code).toBe("worker_not_found");
  });

  it("an invalid JSON body is described once, with the parser's reason", async () => {
    const s = await start({ workers: workers(1) });
    const res = await s.app.inject({
      method: "POST",
      url: "/v1/route",
      headers: json,
      payload: '{"token_ids": [1,',
    });
    expect(res.statusCode).toBe(400);
    const { message } = res.json().error as { message: string };
    expect(message).toMatch(/^the body is not valid JSON/);
    expect(message.toLowerCase().match(/not valid json/g)).toHaveLength(1);
  });

  it("onAllStale: route (default) answers with a stale worker, flagged", async () => {
    const s = await start({ workers: workers(2) }, clock);
    now += 10_000;
    const res = await s.app.inject({
      method: "POST",
      url: "/v1/route",
      headers: json,
      payload: { token_ids: [1, 2, 3], request_id: "r1" },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().fallbacks.all_stale).toBe(true);
  });

  it("onAllStale: reject answers 503 no_fresh_worker and keeps nothing in flight", async () => {
    const s = await start({ server: { onAllStale: "reject" }, workers: workers(2) }, clock);
    now += 10_000;
    const route = () =>
      s!.app.inject({
        method: "POST",
        url: "/v1/route",
        headers: json,
        payload: { token_ids: [1, 2, 3], request_id: "r1" },
      });
    const res = await route();
    expect(res.statusCode).toBe(503);
    expect(res.json().error.code).toBe("no_fresh_worker");
    expect(res.json().error.message).toContain("server.onAllStale");
    const done = await s.app.inject({ method: "POST", url: "/v1/requests/r1/done" });
    expect(done.statusCode).toBe(404); // the rejected request was not recorded
    // One worker with fresh load: routed again, to that worker.
    const push = await s.app.inject({
      method: "PUT",
      url: "/v1/workers/w1/load",
      headers: json,
      payload: { running: 0, waiting: 0, kv_usage: 0 },
    });
    expect(push.statusCode).toBeLessThan(300);
    const ok = await route();
    expect(ok.statusCode).toBe(200);
    expect(ok.json().worker.id).toBe("w1");
  });
});
