/**
 * The `node:http` listener ahead of fastify for the two OpenAI POST routes
 * (`src/http/gateway-front.ts`): whatever it answers itself or hands to fastify, a bad
 * request gets the answer fastify's routes give (status, the one error shape, the field
 * named, `Connection: close` where fastify's parser sets it) — compared, request by
 * request, with the same request sent to fastify's routes through `app.inject()`, which
 * the listener never sees. Real HTTP on loopback; a scripted worker for the good requests.
 */

import { Agent, request as httpRequest } from "node:http";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { Gateway } from "../src/gateway/gateway.js";
import {
  plainEntry,
  type RunningGateway,
  type ScriptedWorker,
  startGateway,
  startScripted,
} from "./gateway-harness.js";

interface Answer {
  readonly status: number;
  readonly headers: Record<string, unknown>;
  readonly body: string;
}

interface Sent {
  readonly method?: string;
  readonly path: string;
  readonly headers?: Record<string, string>;
  readonly body?: string | Buffer;
  /** Send the body with `Transfer-Encoding: chunked` (no content-length). */
  readonly chunked?: boolean;
}

/** One request on its own connection, raw (the headers exactly as given). */
function send(base: string, s: Sent): Promise<Answer> {
  const url = new URL(s.path, base);
  return new Promise((resolve, reject) => {
    const body = s.body === undefined ? undefined : Buffer.from(s.body);
    const headers: Record<string, string> = { ...s.headers };
    if (body !== undefined && s.chunked !== true) headers["content-length"] = String(body.length);
    const req = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname + url.search,
        method: s.method ?? "POST",
        headers,
        agent: false,
      },
      (res) => {
        const parts: Buffer[] = [];
        res.on("data", (c: Buffer) => parts.push(c));
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(parts).toString(),
          }),
        );
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    if (body !== undefined && s.chunked === true) {
      // Two chunks: Node sends Transfer-Encoding: chunked when no length is given.
      const half = Math.floor(body.length / 2);
      req.write(body.subarray(0, half));
      req.end(body.subarray(half));
    } else req.end(body);
  });
}

/** The same request through fastify's routes (`inject` bypasses the HTTP server). */
async function viaFastify(gw: RunningGateway, s: Sent): Promise<Answer> {
  const r = await gw.service.app.inject({
    method: (s.method ?? "POST") as "POST",
    url: s.path,
    headers: s.headers ?? {},
    ...(s.body === undefined ? {} : { payload: s.body }),
  });
  return { status: r.statusCode, headers: r.headers, body: r.body };
}

/** Equal as answers: status, body, content type, Retry-After, and fastify's `Connection: close`. */
async function expectSameAnswer(gw: RunningGateway, s: Sent, status: number, code: string) {
  const real = await send(gw.url, s);
  const ref = await viaFastify(gw, s);
  expect(ref.status).toBe(status);
  expect(JSON.parse(ref.body).error.code).toBe(code);
  expect(real.status).toBe(ref.status);
  expect(JSON.parse(real.body)).toEqual(JSON.parse(ref.body));
  expect(real.headers["content-type"]).toBe(ref.headers["content-type"]);
  expect(real.headers["retry-after"]).toBe(ref.headers["retry-after"]);
  if (ref.headers.connection === "close") expect(real.headers.connection).toBe("close");
  return JSON.parse(real.body) as { error: { code: string; message: string; param?: string } };
}

const JSON_CT = { "content-type": "application/json" };
const AUTH = { authorization: "Bearer s3cret" };
const LIMIT = 4096;

describe("gateway listener ahead of fastify", () => {
  let worker: ScriptedWorker;
  let gw: RunningGateway;

  beforeAll(async () => {
    worker = await startScripted((_r, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end('{"id":"cmpl-1","choices":[{"text":"ok"}],"usage":{"prompt_tokens":3}}');
    });
    gw = await startGateway({
      workers: [plainEntry("w", worker.url)],
      gateway: { authToken: "s3cret" },
      server: { bodyLimitBytes: LIMIT },
    });
  });
  afterAll(async () => {
    await gw?.close();
    await worker?.close();
  });

  it("serves good requests: a query string, a charset, both routes", async () => {
    for (const [path, body] of [
      ["/v1/completions?x=1", { model: "sim-model", prompt: [1, 2, 3] }],
      ["/v1/chat/completions", { model: "sim-model", messages: [{ role: "user", content: "hi" }] }],
    ] as const) {
      const r = await send(gw.url, {
        path,
        headers: { "content-type": "application/json; charset=utf-8", ...AUTH },
        body: JSON.stringify(body),
      });
      expect(r.status).toBe(200);
      expect(r.headers["x-kvrouter-worker"]).toBe("w#0");
      // (A chat's prompt was asked of the worker's /tokenize first: no local tokenizer.)
      const forwarded = worker.requests.at(-1)!;
      expect(forwarded.url).toBe(path.split("?")[0]);
      expect(forwarded.body).toBe(JSON.stringify(body));
    }
  });

  it("takes ordinary requests itself and hands the others to fastify", async () => {
    // Who gathered each body's bytes, by the caller of Buffer.concat (as in
    // gateway-retention.test.ts): the listener, or fastify's content-type parser.
    const gatherers: string[] = [];
    const concat = Buffer.concat;
    Buffer.concat = ((list: readonly Uint8Array[], n?: number) => {
      const b = concat(list, n);
      if (b.includes('"probe":"front"')) {
        const caller = (new Error().stack ?? "").split("\n")[2] ?? "";
        gatherers.push(
          /gateway-front/.test(caller)
            ? "listener"
            : /content-type-parser/.test(caller)
              ? "fastify"
              : "other",
        );
      }
      return b;
    }) as typeof Buffer.concat;
    try {
      const body = JSON.stringify({ model: "sim-model", prompt: [1, 2, 3], probe: "front" });
      const s = { path: "/v1/completions", headers: { ...JSON_CT, ...AUTH }, body };
      expect((await send(gw.url, s)).status).toBe(200);
      // Chunked: no length to check against the limit first, so fastify's.
      expect((await send(gw.url, { ...s, chunked: true })).status).toBe(200);
      // ("other": the scripted worker gathering what it received.)
      expect(gatherers.filter((g) => g !== "other")).toEqual(["listener", "fastify"]);
    } finally {
      Buffer.concat = concat;
    }
  });

  it("a missing, malformed or wrong token: the same 401", async () => {
    const body = JSON.stringify({ model: "sim-model", prompt: [1] });
    const auths: Record<string, string>[] = [
      {},
      { authorization: "Basic abc" },
      { authorization: "Bearer nope" },
    ];
    for (const auth of auths) {
      const e = await expectSameAnswer(
        gw,
        { path: "/v1/completions", headers: { ...JSON_CT, ...auth }, body },
        401,
        "unauthorized",
      );
      expect(e.error.message).toMatch(/gateway\.authToken|Bearer <token>/);
    }
  });

  it("a body past server.bodyLimitBytes: the same 413, with a length or chunked", async () => {
    const body = JSON.stringify({ model: "sim-model", prompt: Array(LIMIT).fill(7) });
    const s = { path: "/v1/completions", headers: { ...JSON_CT, ...AUTH }, body };
    const e = await expectSameAnswer(gw, s, 413, "body_too_large");
    expect(e.error.message).toContain("server.bodyLimitBytes");
    const chunked = await send(gw.url, { ...s, chunked: true });
    expect(chunked.status).toBe(413);
    expect(JSON.parse(chunked.body)).toEqual(e);
  });

  it("a content type other than JSON, or none: the same 415", async () => {
    const body = JSON.stringify({ model: "sim-model", prompt: [1] });
    const types: Record<string, string>[] = [
      { "content-type": "text/plain" },
      { "content-type": "application/jsonx" },
      {},
    ];
    for (const ct of types) {
      await expectSameAnswer(
        gw,
        { path: "/v1/chat/completions", headers: { ...ct, ...AUTH }, body },
        415,
        "unsupported_media_type",
      );
    }
  });

  it("bad or empty JSON: the same 400 invalid_json, connection closed", async () => {
    for (const [path, body] of [
      ["/v1/completions", '{"model":"sim-model","prompt":[1,2'],
      ["/v1/chat/completions", "{nope"],
      ["/v1/completions", ""],
    ] as const) {
      const e = await expectSameAnswer(
        gw,
        { path, headers: { ...JSON_CT, ...AUTH }, body },
        400,
        "invalid_json",
      );
      expect(e.error.message).toContain("the body");
    }
  });

  it("a body nested past server.maxJsonDepth: the same 400 json_too_deep, nothing forwarded", async () => {
    const nested = (n: number) => `${"[".repeat(n)}1${"]".repeat(n)}`;
    const before = worker.requests.length;
    for (const [path, body] of [
      // A completion's token ids are read from the bytes; the rest still nests too deep.
      ["/v1/completions", `{"model":"sim-model","prompt":[1,2,3],"x":${nested(100)}}`],
      ["/v1/completions", `{"model":"sim-model","prompt":"hi","x":${nested(100)}}`],
      [
        "/v1/chat/completions",
        `{"model":"sim-model","messages":[{"role":"user","content":"hi"}],"x":${nested(64)}}`,
      ],
    ] as const) {
      const e = await expectSameAnswer(
        gw,
        { path, headers: { ...JSON_CT, ...AUTH }, body },
        400,
        "json_too_deep",
      );
      expect(e.error.message).toContain("64 levels");
    }
    expect(worker.requests.length).toBe(before);
    // A chat's tools carry JSON schemas, which nest: 23 levels pass.
    let schema: Record<string, unknown> = { type: "string" };
    for (let i = 0; i < 9; i++) schema = { type: "object", properties: { a: schema } };
    const tools = [{ type: "function", function: { name: "f", parameters: schema } }];
    const ok = await send(gw.url, {
      path: "/v1/chat/completions",
      headers: { ...JSON_CT, ...AUTH },
      body: JSON.stringify({
        model: "sim-model",
        messages: [{ role: "user", content: "hi" }],
        tools,
      }),
    });
    expect(ok.status).toBe(200);
  });

  it("a rejection that is not an Error: the same 500 internal_error, and the service stays up", async () => {
    const good = {
      path: "/v1/completions",
      headers: { ...JSON_CT, ...AUTH },
      body: JSON.stringify({ model: "sim-model", prompt: [1, 2, 3] }),
    };
    const spy = vi.spyOn(Gateway.prototype, "handle").mockRejectedValue(undefined);
    try {
      const e = await expectSameAnswer(gw, good, 500, "internal_error");
      expect(e.error.message).toBe("internal error: undefined");
    } finally {
      spy.mockRestore();
    }
    expect((await send(gw.url, good)).status).toBe(200);
  });

  it("fields the gateway rejects: the same 4xx naming the field", async () => {
    for (const [path, body, param] of [
      ["/v1/completions", { model: "sim-model" }, "prompt"],
      ["/v1/completions", { model: "sim-model", prompt: [1], stream: "yes" }, "stream"],
      ["/v1/chat/completions", { model: "sim-model", messages: "hi" }, "messages"],
      ["/v1/completions", [1, 2], null],
    ] as const) {
      const e = await expectSameAnswer(
        gw,
        { path, headers: { ...JSON_CT, ...AUTH }, body: JSON.stringify(body) },
        400,
        "invalid_request",
      );
      if (param !== null) expect(e.error.param).toBe(param);
    }
    const unknown = await expectSameAnswer(
      gw,
      {
        path: "/v1/completions",
        headers: { ...JSON_CT, ...AUTH },
        body: JSON.stringify({ model: "no-such-model", prompt: [1] }),
      },
      404,
      "model_not_found",
    );
    expect(unknown.error.param).toBe("model");
  });

  it("other methods stay fastify's: 405 with Allow", async () => {
    const r = await send(gw.url, { method: "GET", path: "/v1/completions", headers: AUTH });
    expect(r.status).toBe(405);
    expect(r.headers.allow).toBe("POST");
  });

  it("while draining: 503 shutting_down with Connection: close, as fastify's hook answers", async () => {
    const draining = await startGateway({
      workers: [plainEntry("w", worker.url)],
      server: { drainMs: 10_000 },
    });
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const post = () =>
      new Promise<Answer>((resolve, reject) => {
        const body = JSON.stringify({ model: "sim-model", prompt: [1, 2] });
        const url = new URL(draining.url);
        const req = httpRequest(
          {
            host: url.hostname,
            port: url.port,
            path: "/v1/completions",
            method: "POST",
            headers: { ...JSON_CT, "content-length": String(body.length) },
            agent,
          },
          (res) => {
            let text = "";
            res.on("data", (d) => {
              text += d;
            });
            res.on("end", () =>
              resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }),
            );
          },
        );
        req.on("error", reject);
        req.end(body);
      });
    try {
      expect((await post()).status).toBe(200);
      // The socket is idle in the agent's pool; the shutdown starts the drain.
      const closing = draining.close();
      const during = await post();
      expect(during.status).toBe(503);
      expect(during.headers.connection).toBe("close");
      expect(JSON.parse(during.body)).toEqual({
        error: {
          code: "shutting_down",
          message: "the router is shutting down; retry on another instance",
          // In OpenAI's shape, as every error on the gateway's routes.
          type: "api_error",
          param: null,
        },
      });
      await closing;
    } finally {
      agent.destroy();
    }
  });
});
