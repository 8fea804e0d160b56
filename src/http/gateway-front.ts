/**
 * The gateway's two OpenAI POST routes (`/v1/completions`, `/v1/chat/completions`) served
 * by a plain `node:http` request listener that runs ahead of fastify, skipping fastify's
 * per-request work (routing, hooks, the content-type parser, the reply object): ~0.2 ms per
 * request at p50 on this project's 2-core VM (docs/benchmarks.md, "The gateway off
 * fastify"). Every other request, and every request on these routes the listener does not
 * take, goes to fastify unchanged.
 *
 * It takes a request only when it can answer it exactly as fastify's routes would, which
 * it decides from the request line and headers alone:
 *   - `POST` to exactly one of the two paths (a query string allowed), not draining;
 *   - the client's bearer token right (or none configured: `gateway.authToken`);
 *   - `content-type: application/json`, optionally with `charset=utf-8`;
 *   - a `content-length` of 1 to `server.bodyLimitBytes` bytes and no `transfer-encoding`.
 * Anything else — a wrong or missing token, another content type, an empty, chunked or
 * oversized body, the drain on shutdown — is handed to fastify, whose hooks, parser and
 * error handler answer it as before (401, 415, 413, 503 in the one error shape). So the
 * only answers the listener writes itself are the ones that need the body: a body nested
 * past `server.maxJsonDepth` or not JSON (400 `json_too_deep` / `invalid_json`, with
 * `Connection: close` as fastify's parser errors have), the gateway's own errors, a bug
 * (500 `internal_error`, logged), or the worker's relayed answer — all from the one
 * sequence the fastify routes run too (`gateway-serve.ts`). The fastify routes stay
 * registered: they serve what is handed over, `app.inject()`, and the 405 for other methods.
 *
 * Once the worker's first byte is relayed, the parsed body and the client's bytes are
 * dropped (a stream may last minutes; test/gateway-retention.test.ts).
 */

import {
  createServer,
  type IncomingMessage,
  type Server,
  type ServerOptions,
  type ServerResponse,
} from "node:http";
import { performance } from "node:perf_hooks";
import type { Gateway } from "../gateway/gateway.js";
import type { GatewayKind } from "../gateway/request-body.js";
import type { LogSink } from "../util/log-sink.js";
import { bearerCheck } from "./auth.js";
import { ApiError, ERROR_CODES, type ErrorCode, errorBody } from "./errors.js";
import { openAiErrorBody } from "./gateway-answer.js";
import { readGatewayBody, sendJson, serveGatewayRequest } from "./gateway-serve.js";

export interface GatewayFrontDeps {
  readonly gateway: Gateway;
  /** `gateway.authToken`: null = the routes are open. */
  readonly authToken: string | null;
  /** `server.bodyLimitBytes`. */
  readonly bodyLimitBytes: number;
  /** `server.maxJsonDepth` (the gateway's routes declare no depth of their own). */
  readonly maxJsonDepth: number;
  /** True once the shutdown drain has started (fastify then answers 503). */
  readonly draining: () => boolean;
  readonly logger: LogSink;
}

const COMPLETIONS = "/v1/completions";
const CHAT = "/v1/chat/completions";

/** The gateway route a URL names exactly (a query string allowed), else null. */
export function gatewayRouteKind(url: string): GatewayKind | null {
  const q = url.indexOf("?");
  const path = q < 0 ? url : url.slice(0, q);
  return path === COMPLETIONS ? "completion" : path === CHAT ? "chat" : null;
}

/** `application/json`, bare or with `charset=utf-8` (any case, optional spaces and quotes). */
const JSON_TYPE = /^application\/json(?:\s*;\s*charset\s*=\s*(?:utf-8|"utf-8"))?\s*$/i;

function sendError(
  res: ServerResponse,
  code: ErrorCode,
  message: string,
  headers?: Record<string, string>,
) {
  sendJson(res, ERROR_CODES[code].status, openAiErrorBody(errorBody(code, message)), headers);
}

export class GatewayFront {
  readonly #d: GatewayFrontDeps;
  readonly #authorized: (header: string | undefined) => boolean;

  constructor(deps: GatewayFrontDeps) {
    this.#d = deps;
    const check = bearerCheck(deps.authToken, "gateway.authToken");
    this.#authorized = (h) => check(h) === null;
  }

  /** Serve the request and return true, or return false (untouched: fastify's to answer). */
  take(req: IncomingMessage, res: ServerResponse): boolean {
    if (req.method !== "POST") return false;
    const kind = gatewayRouteKind(req.url ?? "");
    if (kind === null || this.#d.draining()) return false;
    const h = req.headers;
    const ct = h["content-type"];
    if (ct === undefined || !JSON_TYPE.test(ct)) return false;
    if (h["transfer-encoding"] !== undefined) return false;
    const length = Number(h["content-length"]);
    if (!(length > 0 && length <= this.#d.bodyLimitBytes)) return false;
    if (!this.#authorized(h.authorization)) return false;
    this.#read(kind, req, res, length);
    return true;
  }

  /** Gather the body (exactly `length` bytes: Node's parser frames it), then serve it. */
  #read(kind: GatewayKind, req: IncomingMessage, res: ServerResponse, length: number): void {
    const chunks: Buffer[] = [];
    let received = 0;
    const onData = (chunk: Buffer) => {
      received += chunk.length;
      if (received > length) {
        // Not reachable through Node's parser; answered as fastify's limit would be.
        off();
        req.pause();
        sendError(
          res,
          "body_too_large",
          `request body exceeds ${this.#d.bodyLimitBytes} bytes (server.bodyLimitBytes)`,
          { connection: "close" },
        );
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      off();
      if (received !== length) {
        sendError(res, "invalid_request", "Request body size did not match Content-Length", {
          connection: "close",
        });
        return;
      }
      // A copy, as fastify makes: the chunks are views of the socket's larger read buffers.
      const raw = Buffer.concat(chunks, length);
      chunks.length = 0;
      this.#serve(kind, req, res, { body: undefined, raw }).catch((err: unknown) => {
        this.#d.logger.error({ err, url: req.url, method: req.method }, "unhandled error in route");
        res.destroy();
      });
    };
    // The client went away mid-body: nobody to answer.
    const onError = () => {
      off();
      res.destroy();
    };
    const off = () => {
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onError);
    };
    req.on("data", onData);
    req.on("end", onEnd);
    req.on("error", onError);
  }

  async #serve(
    kind: GatewayKind,
    req: IncomingMessage,
    res: ServerResponse,
    /** The client's bytes, then its parsed body too, until the first byte is relayed. */
    held: { body: unknown; raw: Buffer | undefined },
  ): Promise<void> {
    const receivedAt = performance.now();
    try {
      held.body = readGatewayBody(held.raw!, kind, this.#d.maxJsonDepth);
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      // As fastify answers its content-type parser's errors: the connection is closed.
      sendJson(res, err.status, openAiErrorBody(err.body()), { connection: "close" });
      return;
    }
    await serveGatewayRequest(this.#d.gateway, res, {
      kind,
      held,
      authorization: req.headers.authorization,
      receivedAt,
      url: req.url,
      logger: this.#d.logger,
    });
  }
}

/**
 * fastify's `serverFactory`: the HTTP/1.1 server fastify would make (the same `http`
 * options, timeouts and request cap, as fastify 5's `lib/server.js` sets them), whose
 * request listener offers each request to `front` first. `front` null: fastify alone.
 */
export function frontServerFactory(front: () => GatewayFront | null) {
  return (
    handler: (req: IncomingMessage, res: ServerResponse) => void,
    opts: {
      readonly http?: ServerOptions;
      readonly keepAliveTimeout?: number;
      readonly requestTimeout?: number;
      readonly connectionTimeout?: number;
      readonly maxRequestsPerSocket?: number;
    },
  ): Server => {
    const server = createServer(opts.http ?? {}, (req, res) => {
      const f = front();
      if (f === null || !f.take(req, res)) handler(req, res);
    });
    if (opts.keepAliveTimeout !== undefined) server.keepAliveTimeout = opts.keepAliveTimeout;
    if (opts.requestTimeout !== undefined) server.requestTimeout = opts.requestTimeout;
    server.setTimeout(opts.connectionTimeout ?? 0);
    if ((opts.maxRequestsPerSocket ?? 0) > 0) {
      server.maxRequestsPerSocket = opts.maxRequestsPerSocket!;
    }
    return server;
  };
}
