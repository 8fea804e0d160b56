/**
 * The HTTP server's own limits and the errors it answers before a route is found: request,
 * header and keep-alive timeouts, a connection cap, the longest path parameter, malformed
 * requests (400), oversized headers (431), slow clients (408), bad URLs, and the drain on
 * shutdown (503 with `Connection: close`). Every one answers in the one error shape
 * (`errors.ts`), never fastify's or Node's own bodies. Values: docs/deployment.md.
 */

import type { Socket } from "node:net";
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { ServerConfig } from "../config/types.js";
import { ERROR_CODES, type ErrorCode, errorBody } from "./errors.js";
import { MAX_REQUEST_ID_LENGTH } from "./schemas.js";

/**
 * Longest raw path parameter: a request id of `MAX_REQUEST_ID_LENGTH` characters, each
 * percent-encoded UTF-8 of up to 4 bytes (12 characters). The schema then checks the
 * decoded length, so `/v1/requests/:id/…` accepts exactly the ids `/v1/route` accepts.
 */
export const MAX_PARAM_LENGTH = MAX_REQUEST_ID_LENGTH * 12;

type Limits = Pick<
  ServerConfig,
  "requestTimeoutMs" | "headersTimeoutMs" | "keepAliveTimeoutMs" | "maxConnections"
>;

/** A raw HTTP/1.1 error response in the project's shape, then the socket is closed. */
function writeRaw(socket: Socket, code: ErrorCode, message: string): void {
  const status = ERROR_CODES[code].status;
  const body = JSON.stringify(errorBody(code, message));
  socket.end(
    `HTTP/1.1 ${status} ${reasonPhrase(status)}\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

function reasonPhrase(status: number): string {
  switch (status) {
    case 400:
      return "Bad Request";
    case 408:
      return "Request Timeout";
    case 431:
      return "Request Header Fields Too Large";
    default:
      return "Error";
  }
}

/** Fastify constructor options for the limits above (spread into `Fastify({...})`). */
export function serverOptions(server: Limits) {
  const timeouts = [server.headersTimeoutMs, server.requestTimeoutMs].filter((t) => t > 0);
  return {
    requestTimeout: server.requestTimeoutMs,
    keepAliveTimeout: server.keepAliveTimeoutMs,
    http: {
      headersTimeout: server.headersTimeoutMs,
      // Node checks those two timeouts on this period (30 s by default, which would let a
      // 1 s timeout run for 31 s): a quarter of the shorter one, within 50..1000 ms.
      connectionsCheckingInterval: Math.min(1000, Math.max(50, Math.min(...timeouts) / 4)),
    },
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    // The drain hook answers 503 in our shape; fastify's own 503 body is not.
    return503OnClosing: false,
    clientErrorHandler(err: NodeJS.ErrnoException, socket: Socket) {
      if (err.code === "ECONNRESET" || socket.destroyed) return;
      if (!socket.writable) {
        socket.destroy();
        return;
      }
      switch (err.code) {
        case "HPE_HEADER_OVERFLOW":
          return writeRaw(
            socket,
            "headers_too_large",
            "the request line and headers exceed the server's limit (Node's --max-http-header-size, 16 KiB by default)",
          );
        case "ERR_HTTP_REQUEST_TIMEOUT":
          return writeRaw(
            socket,
            "request_timeout",
            `the request was not received in time (server.headersTimeoutMs = ${server.headersTimeoutMs} ms for headers, server.requestTimeoutMs = ${server.requestTimeoutMs} ms in all)`,
          );
        default:
          return writeRaw(
            socket,
            "bad_request",
            `malformed HTTP request (${err.code ?? "parse error"})`,
          );
      }
    },
    frameworkErrors(err: FastifyError, _req: FastifyRequest, reply: FastifyReply) {
      const message =
        err.code === "FST_ERR_MAX_PARAM_LENGTH"
          ? `a path parameter is longer than ${MAX_PARAM_LENGTH} characters (request ids: at most ${MAX_REQUEST_ID_LENGTH})`
          : err.code === "FST_ERR_BAD_URL"
            ? "the URL is not valid (bad percent-encoding)"
            : err.message;
      return reply.status(400).send(errorBody("invalid_request", message));
    },
  } as const;
}

/** Cap open connections: Node closes the ones past `maxConnections` at accept. */
export function applyConnectionCap(app: FastifyInstance, server: Limits): void {
  app.server.maxConnections = server.maxConnections;
}

/**
 * Graceful drain: once `start()` is called every request, including those arriving on
 * idle keep-alive connections, is answered 503 `shutting_down` with `Connection: close`
 * (so the client retries elsewhere and the socket ends cleanly instead of being reset).
 */
export class Drain {
  #active = false;

  get active(): boolean {
    return this.#active;
  }

  start(): void {
    this.#active = true;
  }

  /** Install the `onRequest` hook (first, before auth and body parsing). */
  install(app: FastifyInstance): void {
    // Callback style: on the hot path this is one boolean test, no promise.
    app.addHook("onRequest", (_req, reply, done) => {
      if (!this.#active) return done();
      reply.header("connection", "close");
      reply
        .status(ERROR_CODES.shutting_down.status)
        .send(errorBody("shutting_down", "the router is shutting down; retry on another instance"));
    });
  }
}

/**
 * Wait until no connection is open or `ms` passed (checked every 25 ms). Resolves at once
 * when the server is not listening.
 */
export async function drainConnections(app: FastifyInstance, ms: number): Promise<void> {
  if (ms <= 0 || !app.server.listening) return;
  const deadline = Date.now() + ms;
  const open = () =>
    new Promise<number>((resolve) => app.server.getConnections((err, n) => resolve(err ? 0 : n)));
  while (Date.now() < deadline && (await open()) > 0) {
    await new Promise((r) => setTimeout(r, 25));
  }
}
