/**
 * Hostile and abusive HTTP input against the real service: deep nesting, huge echoed
 * values, overflowing overrides, request ids at the length limit, forged lifecycle
 * calls, oversized headers, slow and malformed requests, too many connections, and
 * requests on keep-alive sockets during the shutdown drain. Every answer is in the one
 * error shape. Socket tests use real HTTP on loopback; their waits bound hangs only.
 */

import { Agent, request } from "node:http";
import { connect, type Socket } from "node:net";
import { describe, expect, it } from "vitest";
import { ERROR_CODES } from "../src/http/errors.js";
import { startsClosedAfterEach, type TestService, workers } from "./http-harness.js";

const start = startsClosedAfterEach();

async function service(server: Record<string, unknown> = {}) {
  const svc = await start({ workers: workers(2), server });
  for (const id of ["w0", "w1"]) {
    await svc.app.inject({
      method: "PUT",
      url: `/v1/workers/${id}/load`,
      payload: { running: 0, waiting: 0, kv_usage: 0.1 },
    });
  }
  return svc;
}

async function listen(s: TestService): Promise<number> {
  await s.app.listen({ host: "127.0.0.1", port: 0 });
  const a = s.app.server.address();
  if (a === null || typeof a === "string") throw new Error("not listening");
  return a.port;
}

const post = (s: TestService, url: string, payload: unknown, headers = {}) =>
  s.app.inject({
    method: "POST",
    url,
    headers: { "content-type": "application/json", ...headers },
    payload: typeof payload === "string" ? payload : JSON.stringify(payload),
  });

/** Everything a raw socket receives until the server closes it. */
function rawExchange(port: number, send: (s: Socket) => void): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(port, "127.0.0.1", () => send(s));
    let data = "";
    s.on("data", (d) => {
      data += d;
    });
    s.on("error", reject);
    s.on("close", () => resolve(data));
  });
}

/** Status and parsed JSON body of a raw HTTP/1.1 response. */
function parseRaw(text: string): { status: number; body: { error: { code: string } } } {
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1]);
  return { status, body: JSON.parse(text.slice(text.indexOf("\r\n\r\n") + 4)) };
}

describe("hostile bodies", () => {
  it("rejects nesting deeper than the schema before parsing it", async () => {
    const s = await service();
    const depth = 500_000;
    const body = `{"token_ids":${"[".repeat(depth)}1${"]".repeat(depth)}}`;
    const r = await post(s, "/v1/route", body);
    expect(r.statusCode).toBe(400);
    expect(r.json().error.code).toBe("json_too_deep");
    expect(r.json().error.message).toMatch(/deeper than 3 levels/);
    // Brackets inside strings are not nesting; a flat body still parses.
    const ok = await post(s, "/v1/route", { token_ids: [1, 2, 3], request_id: "[[[{{{" });
    expect(ok.statusCode).toBe(200);
  });

  it("echoes bad values bounded, however large", async () => {
    const s = await service();
    const huge = "m".repeat(1024 * 1024);
    const r = await post(s, "/v1/route", { token_ids: [1], model: huge });
    expect(r.statusCode).toBe(400);
    // Before: the whole megabyte came back in details[].value.
    expect(r.body.length).toBeLessThan(2000);
    expect(r.json().error.details[0].value).toBe(`${"m".repeat(77)}...`);
  });

  it("bounds overrides so costs stay finite: 400 naming the field", async () => {
    const s = await service();
    const r = await post(s, "/v1/route", { token_ids: [1, 2, 3], overrides: { prefill: 1e308 } });
    // Before: 500 "selectCandidate: no eligible candidate" (the cost overflowed).
    expect(r.statusCode).toBe(400);
    expect(r.json().error.code).toBe("invalid_request");
    expect(r.json().error.message).toMatch(/body\/overrides\/prefill must be <= 1000000/);
    const host = await post(s, "/v1/route", { token_ids: [1], overrides: { host: 2 } });
    expect(host.json().error.message).toMatch(/body\/overrides\/host must be <= 1/);
    const max = await post(s, "/v1/route", { token_ids: [1], overrides: { prefill: 1e6 } });
    expect(max.statusCode).toBe(200);
  });
});

describe("lifecycle calls cannot be forged or lost", () => {
  it("accepts exactly the request ids /v1/route accepts", async () => {
    const s = await service();
    // 256 characters, some of them 4-byte UTF-8 (12 characters once percent-encoded).
    const id = `${"😀".repeat(50)}${"x".repeat(206)}`;
    expect([...id].length).toBe(256);
    const routed = await post(s, "/v1/route", { token_ids: [1, 2], request_id: id });
    expect(routed.statusCode).toBe(200);
    const enc = encodeURIComponent(id);
    for (const event of ["first-token", "done"]) {
      const r = await s.app.inject({ method: "POST", url: `/v1/requests/${enc}/${event}` });
      // Before: 414 (fastify's maxParamLength 100): the request could never be reported.
      expect(r.statusCode, r.body).toBe(200);
    }
    const tooLong = `${id}y`;
    const route = await post(s, "/v1/route", { token_ids: [1], request_id: tooLong });
    const done = await s.app.inject({
      method: "POST",
      url: `/v1/requests/${encodeURIComponent(tooLong)}/done`,
    });
    expect([route.statusCode, done.statusCode]).toEqual([400, 400]);
    expect(done.json().error.code).toBe("invalid_request");
    // Past the raw parameter limit and bad percent-encoding: fastify's own errors, in our shape.
    const huge = await s.app.inject({
      method: "POST",
      url: `/v1/requests/${"a".repeat(4000)}/done`,
    });
    expect(huge.statusCode).toBe(400);
    expect(huge.json().error).toMatchObject({ code: "invalid_request" });
    expect(huge.json().error.message).toMatch(/longer than 3072 characters/);
    const badUrl = await s.app.inject({ method: "POST", url: "/v1/requests/%E0%A4%A/done" });
    expect(badUrl.statusCode).toBe(400);
    expect(badUrl.json().error.code).toBe("invalid_request");
  });

  it("with server.decisionToken, routing and reports need it", async () => {
    const s = await service({ decisionToken: "d3cision" });
    const auth = { authorization: "Bearer d3cision" };
    expect((await post(s, "/v1/route", { token_ids: [1] })).statusCode).toBe(401);
    expect((await post(s, "/v1/match", { token_ids: [1] })).statusCode).toBe(401);
    const r = await post(s, "/v1/route", { token_ids: [1], request_id: "mine" }, auth);
    expect(r.statusCode).toBe(200);
    const forged = await s.app.inject({ method: "POST", url: "/v1/requests/mine/done" });
    expect(forged.statusCode).toBe(401);
    expect(forged.json().error.message).toMatch(/server\.decisionToken/);
    const wrong = await s.app.inject({
      method: "POST",
      url: "/v1/requests/mine/done",
      headers: { authorization: "Bearer guess" },
    });
    expect(wrong.statusCode).toBe(401);
    const mine = await s.app.inject({
      method: "POST",
      url: "/v1/requests/mine/done",
      headers: auth,
    });
    expect(mine.statusCode).toBe(200);
  });

  it("counts requests dropped by the per-worker cap", async () => {
    const svc = await start({
      workers: workers(1),
      inFlight: { maxPerWorker: 2 },
    });
    for (let i = 0; i < 5; i++) await post(svc, "/v1/route", { token_ids: [1, 2, 3] });
    const metrics = (await svc.app.inject({ method: "GET", url: "/metrics" })).body;
    expect(metrics).toMatch(/^kvrouter_inflight_unreported_total\{report="dropped"\} 3$/m);
    expect(metrics).toMatch(/^kvrouter_inflight_unreported_total\{report="done"\} 0$/m);
  });
});

describe("the server's own errors use the one shape", () => {
  it("431 for oversized headers, 400 for a malformed request", async () => {
    const s = await service();
    const port = await listen(s);
    const big = await rawExchange(port, (sock) =>
      sock.write(`GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(64 * 1024)}\r\n\r\n`),
    );
    const r431 = parseRaw(big);
    // Before: fastify's {"error":"Request Header Fields Too Large",…}.
    expect(r431.status).toBe(431);
    expect(r431.body.error.code).toBe("headers_too_large");
    const bad = parseRaw(await rawExchange(port, (sock) => sock.write("NOT HTTP AT ALL\r\n\r\n")));
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe("bad_request");
    expect(ERROR_CODES[bad.body.error.code as keyof typeof ERROR_CODES]).toBeDefined();
  });

  it("closes a connection that sends its body too slowly (408 in our shape)", async () => {
    const s = await service({ requestTimeoutMs: 400, headersTimeoutMs: 200 });
    const port = await listen(s);
    let timer: NodeJS.Timeout | undefined;
    // Bound check: before, requestTimeout was 0 and this socket stayed open forever.
    const text = await rawExchange(port, (sock) => {
      sock.write(
        "POST /v1/route HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{",
      );
      timer = setInterval(() => sock.writable && sock.write(" "), 20);
    });
    clearInterval(timer);
    const r = parseRaw(text);
    expect(r.status).toBe(408);
    expect(r.body.error.code).toBe("request_timeout");
  });

  it("caps open connections", async () => {
    const s = await service({ maxConnections: 2 });
    const port = await listen(s);
    const idle: Socket[] = [];
    for (let i = 0; i < 2; i++) {
      idle.push(
        await new Promise<Socket>((resolve) => {
          const sock = connect(port, "127.0.0.1", () => resolve(sock));
        }),
      );
    }
    try {
      // Wait until the server has accepted both, then a third is dropped at accept.
      for (;;) {
        const n = await new Promise<number>((r) => s.app.server.getConnections((_e, c) => r(c)));
        if (n >= 2) break;
        await new Promise((r) => setTimeout(r, 10));
      }
      const third = await rawExchange(port, (sock) =>
        sock.write("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"),
      ).catch((err: NodeJS.ErrnoException) => `error ${err.code}`);
      expect(third).not.toMatch(/^HTTP\/1\.1 200/);
    } finally {
      for (const sock of idle) sock.destroy();
    }
  });
});

describe("shutdown drain", () => {
  it("answers 503 + Connection: close on an idle keep-alive socket", async () => {
    const s = await service({ drainMs: 10_000 });
    const port = await listen(s);
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const get = () =>
      new Promise<{ status: number; connection: string | undefined; body: string }>(
        (resolve, reject) => {
          const req = request({ port, host: "127.0.0.1", path: "/healthz", agent }, (res) => {
            let body = "";
            res.on("data", (d) => {
              body += d;
            });
            res.on("end", () =>
              resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, body }),
            );
          });
          req.on("error", reject);
          req.end();
        },
      );
    expect((await get()).status).toBe(200);
    // The socket is now idle in the agent's pool. SIGTERM → service.close():
    const closing = s.close();
    // Before: the idle socket was destroyed at once and this got ECONNRESET.
    const during = await get();
    expect(during.status).toBe(503);
    expect(during.connection).toBe("close");
    expect(JSON.parse(during.body).error.code).toBe("shutting_down");
    // The client's socket closed with that answer, so the drain ends without waiting
    // for drainMs (the test's own timeout bounds it).
    await closing;
    agent.destroy();
  });
});
