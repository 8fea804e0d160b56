/**
 * Gateway mode, the happy paths over real HTTP on loopback: answers are the worker's own
 * bytes (streaming and not), the gateway's headers say what happened, the data-parallel
 * rank reaches the engine, auth works both ways, /v1/models is the fleet's union, and bad
 * bodies get a 4xx naming the field. Lifecycle: nothing stays in flight afterwards.
 */

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SimWorkerHandle } from "../src/sim/sim-worker.js";
import {
  inFlightTotal,
  metricValue,
  plainEntry,
  type RunningGateway,
  type ScriptedWorker,
  simEntry,
  startGateway,
  startScripted,
  startSim,
} from "./gateway-harness.js";

const PROMPT = Array.from({ length: 100 }, (_, i) => 500 + ((i * 7919) % 20000));
/** Per-call fields of the simulator's answers (ids and timestamps), blanked to compare. */
const normalise = (s: string) =>
  s.replace(/"id":"(chat)?cmpl-[0-9a-f]+"/g, '"id":"X"').replace(/"created":\d+/g, '"created":0');

async function post(url: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  return { res, text: await res.text() };
}

describe("gateway: answers pass through unchanged", () => {
  let sim: SimWorkerHandle;
  let gw: RunningGateway;
  beforeAll(async () => {
    sim = await startSim();
    gw = await startGateway({ workers: [simEntry("s0", sim)] });
  });
  afterAll(async () => {
    await gw?.close();
    await sim?.close();
  });

  it("non-streaming completion and chat: same bytes as the worker's (ids aside), gateway headers", async () => {
    for (const [path, body] of [
      ["/v1/completions", { model: "sim-model", prompt: PROMPT, max_tokens: 5, foo: "kept" }],
      [
        "/v1/chat/completions",
        {
          model: "sim-model",
          messages: [
            { role: "system", content: "You are terse." },
            { role: "user", content: "Hello there" },
          ],
          max_tokens: 4,
        },
      ],
    ] as const) {
      // The second call finds the prompt cached, like the gateway's call after it.
      await post(`${sim.url}${path}`, body);
      const direct = await post(`${sim.url}${path}`, body);
      const via = await post(`${gw.url}${path}`, body);
      expect(via.res.status).toBe(200);
      expect(normalise(via.text)).toBe(normalise(direct.text));
      expect(via.res.headers.get("content-type")).toBe(direct.res.headers.get("content-type"));
      expect(via.res.headers.get("x-kvrouter-worker")).toBe("s0#0");
      expect(via.res.headers.get("x-kvrouter-request-id")).toMatch(/^gw-/);
      expect(Number(via.res.headers.get("x-kvrouter-cached-tokens"))).toBeGreaterThanOrEqual(0);
      // The gateway's own time on the path, as W3C Server-Timing.
      expect(via.res.headers.get("server-timing")).toMatch(/^kvrouter;dur=\d+\.\d{3}$/);
    }
    expect(await inFlightTotal(gw.url)).toBe(0);
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    expect(metricValue(metrics, "kvrouter_gateway_own_seconds_count")).toBe(2);
  });

  it("streaming: the same server-sent events as calling the worker directly", async () => {
    const body = {
      model: "sim-model",
      prompt: PROMPT,
      max_tokens: 12,
      stream: true,
      stream_options: { include_usage: true },
    };
    await post(`${sim.url}/v1/completions`, body);
    const direct = await post(`${sim.url}/v1/completions`, body);
    const via = await post(`${gw.url}/v1/completions`, body);
    expect(via.res.status).toBe(200);
    expect(via.res.headers.get("content-type")).toContain("text/event-stream");
    expect(normalise(via.text)).toBe(normalise(direct.text));
    expect(via.text.trimEnd().endsWith("data: [DONE]")).toBe(true);
    expect(await inFlightTotal(gw.url)).toBe(0);
  });

  it("a stream without include_usage: the client gets the same events, the check still runs", async () => {
    const body = { model: "sim-model", prompt: PROMPT, max_tokens: 6, stream: true };
    const checks = async () =>
      metricValue(
        await (await fetch(`${gw.url}/metrics`)).text(),
        "kvrouter_gateway_prediction_error_tokens_count",
      );
    const before = await checks();
    await post(`${sim.url}/v1/completions`, body);
    const direct = await post(`${sim.url}/v1/completions`, body);
    const via = await post(`${gw.url}/v1/completions`, body);
    expect(via.res.status).toBe(200);
    expect(direct.text).not.toContain('"usage"');
    expect(normalise(via.text)).toBe(normalise(direct.text));
    expect(await checks()).toBe(before + 1);
  });

  it("relays a worker's 4xx as it is (no retry: the worker is healthy)", async () => {
    const body = { model: "sim-model", prompt: PROMPT, max_tokens: 0 };
    const direct = await post(`${sim.url}/v1/completions`, body);
    const via = await post(`${gw.url}/v1/completions`, body);
    expect(direct.res.status).toBe(400);
    expect(via.res.status).toBe(400);
    expect(via.text).toBe(direct.text);
    expect(await inFlightTotal(gw.url)).toBe(0);
  });

  it("bad bodies get a 4xx naming the field", async () => {
    const cases: [string, unknown, number, string, RegExp][] = [
      ["/v1/chat/completions", { model: "sim-model" }, 400, "invalid_request", /body\/messages/],
      [
        "/v1/chat/completions",
        { messages: [{ content: "x" }] },
        400,
        "invalid_request",
        /messages\/0\/role/,
      ],
      ["/v1/completions", { prompt: 5 }, 400, "invalid_request", /body\/prompt/],
      ["/v1/completions", { prompt: "x", stream: "yes" }, 400, "invalid_request", /body\/stream/],
      ["/v1/completions", { prompt: "x", model: 3 }, 400, "invalid_request", /body\/model/],
      ["/v1/completions", "{not json", 400, "invalid_json", /JSON/],
      ["/v1/completions", [1, 2], 400, "invalid_request", /JSON object/],
      ["/v1/completions", { prompt: "x", model: "nope" }, 404, "model_not_found", /nope/],
    ];
    for (const [path, body, status, code, message] of cases) {
      const r = await post(`${gw.url}${path}`, body);
      expect(r.res.status, r.text).toBe(status);
      const err = JSON.parse(r.text).error;
      expect(err.code).toBe(code);
      expect(err.message).toMatch(message);
    }
    expect(await inFlightTotal(gw.url)).toBe(0);
  });

  it("GET /v1/models lists the fleet's models in OpenAI's shape", async () => {
    const res = await fetch(`${gw.url}/v1/models`);
    const body = (await res.json()) as { object: string; data: { id: string; object: string }[] };
    expect(body.object).toBe("list");
    expect(body.data.map((m) => m.id)).toEqual(["sim-model"]);
    expect(body.data[0]!.object).toBe("model");
  });

  it("routes text prompts on the worker's own tokens (fallback /tokenize): a repeat is predicted cached", async () => {
    const prompt = "The quick brown fox jumps over the lazy dog. ".repeat(20);
    const first = await post(`${gw.url}/v1/completions`, {
      model: "sim-model",
      prompt,
      max_tokens: 1,
    });
    expect(first.res.status).toBe(200);
    let cached = 0;
    for (let i = 0; i < 50 && cached === 0; i++) {
      await new Promise((r) => setTimeout(r, 20));
      const again = await post(`${gw.url}/v1/completions`, {
        model: "sim-model",
        prompt,
        max_tokens: 1,
      });
      cached = Number(again.res.headers.get("x-kvrouter-cached-tokens"));
    }
    expect(cached).toBeGreaterThan(0);
  });
});

describe("gateway: headers to and from workers", () => {
  let worker: ScriptedWorker;
  const SSE = ['data: {"a":1}\n\n', 'data: {"b":2}\n\n', "data: [DONE]\n\n"];
  beforeAll(async () => {
    worker = await startScripted((req, res) => {
      if (req.url === "/v1/models") {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ object: "list", data: [{ id: "other-model" }] }));
        return;
      }
      res.writeHead(200, { "content-type": "text/event-stream", "x-engine": "scripted" });
      let i = 0;
      const next = () => {
        if (i === SSE.length) return res.end();
        res.write(SSE[i++]);
        setTimeout(next, 5);
      };
      next();
    });
  });
  afterAll(async () => {
    await worker?.close();
  });

  it("byte-identical stream, the client's body bytes, the DP rank and the worker key", async () => {
    const gw = await startGateway({
      workers: [plainEntry("dp", worker.url, { dpSize: 2, model: null })],
      gateway: { workerApiKey: "engine-key" },
    });
    try {
      const raw =
        '{"model":"m","prompt":[1,2,3],  "stream":true, "stream_options":{"include_usage":false}, "extra":{"x":[1]}}';
      const seen = new Set<string>();
      for (let i = 0; i < 8; i++) {
        const before = worker.requests.length;
        const r = await post(`${gw.url}/v1/completions`, raw, { authorization: "Bearer client" });
        expect(r.res.status).toBe(200);
        expect(r.text).toBe(SSE.join(""));
        expect(r.res.headers.get("x-engine")).toBe("scripted");
        const got = worker.requests[before]!;
        expect(got.body).toBe(raw);
        expect(got.url).toBe("/v1/completions");
        expect(got.headers.authorization).toBe("Bearer engine-key");
        const key = r.res.headers.get("x-kvrouter-worker")!;
        expect(key).toBe(`dp#${got.headers["x-data-parallel-rank"]}`);
        expect(got.headers["x-request-id"]).toBe(r.res.headers.get("x-kvrouter-request-id"));
        seen.add(key);
      }
      // A stream that did not ask for usage: only include_usage is spliced in (documented).
      const bare = '{"model":"m","prompt":[1,2,3],"stream":true}';
      const n = worker.requests.length;
      expect((await post(`${gw.url}/v1/completions`, bare)).text).toBe(SSE.join(""));
      expect(worker.requests[n]!.body).toBe(
        '{"stream_options":{"include_usage":true},"model":"m","prompt":[1,2,3],"stream":true}',
      );
      // Both ranks are candidates; with equal load the router spreads over them.
      expect(seen.size).toBe(2);
      const models = (await (await fetch(`${gw.url}/v1/models`)).json()) as {
        data: { id: string }[];
      };
      expect(models.data.map((m) => m.id)).toEqual(["other-model"]);
    } finally {
      await gw.close();
    }
  });

  it("tokenization that fails routes on load alone, counted, and still serves", async () => {
    // This worker answers /tokenize with an event stream: not the token list expected.
    const gw = await startGateway({ workers: [plainEntry("w", worker.url, { model: null })] });
    try {
      const r = await post(`${gw.url}/v1/completions`, { model: "m", prompt: "hello" });
      expect(r.res.status).toBe(200);
      expect(r.res.headers.get("x-kvrouter-cached-tokens")).toBe("0");
      const m = await (await fetch(`${gw.url}/metrics`)).text();
      expect(
        metricValue(m, "kvrouter_gateway_tokenize_failures_total", { reason: "bad_response" }),
      ).toBe(1);
      expect(await inFlightTotal(gw.url)).toBe(0);
    } finally {
      await gw.close();
    }
  });

  it("an engine that counts another prompt length is flagged (tokenizer mismatch)", async () => {
    const lying = await startScripted((_r, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          choices: [],
          usage: { prompt_tokens: 4, prompt_tokens_details: { cached_tokens: 0 } },
        }),
      );
    });
    const gw = await startGateway({ workers: [plainEntry("w", lying.url)] });
    try {
      const count = async () =>
        metricValue(
          await (await fetch(`${gw.url}/metrics`)).text(),
          "kvrouter_gateway_prompt_length_mismatches_total",
          { worker: "w#0" },
        );
      await post(`${gw.url}/v1/completions`, { prompt: [1, 2, 3, 4] });
      expect(await count()).toBe(0);
      await post(`${gw.url}/v1/completions`, { prompt: [1, 2, 3] });
      expect(await count()).toBe(1);
    } finally {
      await gw.close();
      await lying.close();
    }
  });

  it("gateway.enabled false: the decision API only", async () => {
    const gw = await startGateway({
      workers: [plainEntry("w", worker.url)],
      gateway: { enabled: false },
    });
    try {
      const r = await post(`${gw.url}/v1/completions`, { prompt: [1] });
      expect(r.res.status).toBe(404);
      expect((await fetch(`${gw.url}/v1/workers`)).status).toBe(200);
    } finally {
      await gw.close();
    }
  });

  it("client bearer auth on the OpenAI routes; the client's token is not forwarded", async () => {
    const gw = await startGateway({
      workers: [plainEntry("w", worker.url)],
      gateway: { authToken: "s3cret" },
    });
    try {
      const body = { model: "sim-model", prompt: [1, 2, 3] };
      const none = await post(`${gw.url}/v1/completions`, body);
      expect(none.res.status).toBe(401);
      expect(JSON.parse(none.text).error.code).toBe("unauthorized");
      const wrong = await post(`${gw.url}/v1/completions`, body, { authorization: "Bearer no" });
      expect(wrong.res.status).toBe(401);
      expect(JSON.parse(wrong.text).error.message).toContain("gateway.authToken");
      const before = worker.requests.length;
      const ok = await post(`${gw.url}/v1/completions`, body, { authorization: "Bearer s3cret" });
      expect(ok.res.status).toBe(200);
      expect(worker.requests[before]!.headers.authorization).toBeUndefined();
      expect((await fetch(`${gw.url}/v1/models`)).status).toBe(401);
      // The decision API is not behind the gateway's token.
      expect((await fetch(`${gw.url}/v1/workers`)).status).toBe(200);
    } finally {
      await gw.close();
    }
  });
});
