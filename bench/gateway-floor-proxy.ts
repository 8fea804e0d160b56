/**
 * The floor for `bench:gateway`: the least an HTTP proxy written in Node does — receive
 * the body, forward it with undici's pooled Agent, stream the answer back with
 * backpressure — and nothing else (no parsing, routing, retries or bookkeeping). Run as
 * a child process by the benchmark: `node bench/gateway-floor-proxy.ts <worker url>[,<url>…] [mode]`;
 * prints `{"port": N}` when listening. Several comma-separated upstreams are taken in
 * turn, request by request (round-robin: the throughput part's responders). Modes: `request` (undici's `request`: a promise and
 * a Readable body per answer, as the gateway forwards today) and `dispatch` (undici's
 * handler interface: the answer's chunks arrive as callbacks, written straight to the
 * client, no stream object in between; backpressure pauses the upstream controller) and
 * `node-http` (Node's own `http.request` with a keep-alive `http.Agent`, the answer piped
 * back: the alternative to undici for the upstream request, measured by
 * `bench:proxy-floor`), and `fastify-dispatch` (`dispatch` behind the gateway's HTTP
 * layer without its work: fastify, a bytes-keeping content-type parser, an `onRequest`
 * hook, the reply hijacked — what fastify costs per request in this role).
 */

import {
  createServer,
  Agent as HttpAgent,
  request as httpRequest,
  type IncomingMessage,
  type ServerResponse,
} from "node:http";
import type { AddressInfo } from "node:net";
import Fastify from "fastify";
import { Agent, type Dispatcher, request } from "undici";

const targets = process.argv[2]?.split(",") ?? [];
const mode = process.argv[3] ?? "request";
const MODES = ["request", "dispatch", "node-http", "fastify-dispatch"];
if (targets.length === 0 || !MODES.includes(mode)) {
  throw new Error(`usage: gateway-floor-proxy <worker url>[,<url>…] [${MODES.join("|")}]`);
}
let turn = 0;
/** The next upstream, round-robin. */
const next = () => targets[turn++ % targets.length]!;
const agent = new Agent({ keepAliveTimeout: 4000 });
const HEADERS = { "content-type": "application/json" };

function viaRequest(req: IncomingMessage, res: ServerResponse, body: Buffer): void {
  request(`${next()}${req.url}`, {
    dispatcher: agent,
    method: "POST",
    headers: HEADERS,
    body,
  }).then(
    (up) => {
      res.writeHead(up.statusCode, { "content-type": String(up.headers["content-type"]) });
      up.body.on("data", (c: Buffer) => {
        if (!res.write(c)) {
          up.body.pause();
          res.once("drain", () => up.body.resume());
        }
      });
      up.body.on("end", () => res.end());
      res.on("close", () => up.body.destroy());
    },
    (err: unknown) => {
      res.writeHead(502);
      res.end(String(err));
    },
  );
}

function viaDispatch(req: IncomingMessage, res: ServerResponse, body: Buffer): void {
  const handler: Dispatcher.DispatchHandler = {
    onRequestStart() {},
    onResponseStart(controller, status, headers) {
      res.writeHead(status, { "content-type": String(headers["content-type"]) });
      res.on("drain", () => controller.resume());
      res.on("close", () => {
        if (!res.writableFinished) controller.abort(new Error("client gone"));
      });
    },
    onResponseData(controller, chunk) {
      if (!res.write(chunk)) controller.pause();
    },
    onResponseEnd() {
      res.end();
    },
    onResponseError(_controller, err) {
      if (res.headersSent) res.destroy(err);
      else {
        res.writeHead(502);
        res.end(String(err));
      }
    },
  };
  agent.dispatch(
    { origin: next(), path: req.url ?? "/", method: "POST", headers: HEADERS, body },
    handler,
  );
}

const httpAgent = new HttpAgent({ keepAlive: true, keepAliveMsecs: 4000 });

function viaNodeHttp(req: IncomingMessage, res: ServerResponse, body: Buffer): void {
  const up = httpRequest(
    `${next()}${req.url}`,
    {
      agent: httpAgent,
      method: "POST",
      headers: { ...HEADERS, "content-length": String(body.length) },
    },
    (answer) => {
      res.writeHead(answer.statusCode ?? 502, {
        "content-type": String(answer.headers["content-type"]),
      });
      answer.pipe(res);
      res.on("close", () => {
        if (!res.writableFinished) up.destroy();
      });
    },
  );
  up.on("error", (err) => {
    if (res.headersSent) res.destroy(err);
    else {
      res.writeHead(502);
      res.end(String(err));
    }
  });
  up.end(body);
}

const forward = mode === "dispatch" ? viaDispatch : mode === "node-http" ? viaNodeHttp : viaRequest;
const ready = (port: number) => process.stdout.write(`${JSON.stringify({ port })}\n`);

if (mode === "fastify-dispatch") {
  // The gateway's HTTP layer without its work: fastify, the body kept as bytes by a
  // content-type parser, an `onRequest` hook, the reply hijacked, then `dispatch`.
  const app = Fastify({ logger: false });
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "buffer" }, (_r, body, done) =>
    done(null, body),
  );
  const hook = (_r: unknown, _p: unknown, done: () => void) => done();
  app.post("/v1/completions", { onRequest: hook }, async (req, reply) => {
    reply.hijack();
    viaDispatch(req.raw, reply.raw, req.body as Buffer);
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  ready((app.server.address() as AddressInfo).port);
} else {
  const server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on("data", (c: Buffer) => parts.push(c));
    req.on("end", () => forward(req, res, Buffer.concat(parts)));
  });
  server.listen(0, "127.0.0.1", () => ready((server.address() as AddressInfo).port));
}
process.on("SIGTERM", () => process.exit(0));
