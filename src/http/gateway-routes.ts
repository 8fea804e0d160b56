/**
 * The OpenAI-compatible routes of gateway mode on fastify: `POST /v1/completions`,
 * `POST /v1/chat/completions`, `GET /v1/models`. A thin adapter: the body's bytes are kept
 * (the worker receives exactly them), the gateway (`src/gateway/gateway.ts`) does the
 * work up to the worker's first byte, then the reply is hijacked and the answer relayed.
 *
 * On a listening server most POSTs never reach these two routes: the `node:http` listener
 * in `gateway-front.ts` serves them ahead of fastify and hands over only what it does not
 * take (a failed token, another content type, an empty, chunked or oversized body, the
 * drain), which these routes answer as they always did; `app.inject()` comes here too.
 * Errors: `gateway-answer.ts` (the same for both).
 */

import type { FastifyInstance, FastifyReply } from "fastify";
import { watchClient } from "../gateway/client-watch.js";
import { ClientGoneError, GatewayError } from "../gateway/errors.js";
import type { Gateway } from "../gateway/gateway.js";
import type { GatewayKind } from "../gateway/request-body.js";
import { parseGatewayBody } from "../gateway/token-id-body.js";
import { requireBearer } from "./auth.js";
import { gatewayErrorAnswer } from "./gateway-answer.js";
import { gatewayRouteKind } from "./gateway-front.js";

function sendGatewayError(reply: FastifyReply, err: GatewayError) {
  const a = gatewayErrorAnswer(err);
  return reply.headers(a.headers).status(a.status).send(a.body);
}

declare module "fastify" {
  interface FastifyRequest {
    /** The JSON body's bytes (gateway routes only). */
    rawBody?: Buffer;
    /** `performance.now()` when the body had arrived, before it was parsed. */
    bodyAt?: number;
  }
}

export function registerGatewayRoutes(
  app: FastifyInstance,
  gateway: Gateway,
  authToken: string | null,
): void {
  const guard = requireBearer(authToken, "gateway.authToken");
  app.register(async (scope) => {
    // Keep the bytes: the worker receives the client's body exactly.
    scope.removeContentTypeParser("application/json");
    scope.addContentTypeParser("application/json", { parseAs: "buffer" }, (req, body, done) => {
      const buf = body as Buffer;
      req.rawBody = buf;
      req.bodyAt = performance.now();
      if (buf.length === 0) {
        done(Object.assign(new Error("empty"), { code: "FST_ERR_CTP_EMPTY_JSON_BODY" }));
        return;
      }
      try {
        // A completion's token ids are read from the bytes, not built by JSON.parse (the
        // raw URL, not `routeOptions`, which builds an object per read; either parse gives
        // the same body, so a URL this misses is only parsed the slower way).
        done(null, parseGatewayBody(buf, gatewayRouteKind(req.url) === "completion"));
      } catch (err) {
        done(err as SyntaxError);
      }
    });

    const handler =
      (kind: GatewayKind) => async (req: import("fastify").FastifyRequest, reply: FastifyReply) => {
        const ac = new AbortController();
        const res = reply.raw;
        const unwatch = watchClient(res, () => ac.abort());
        try {
          const answer = await gateway.handle({
            kind,
            body: req.body,
            raw: req.rawBody ?? Buffer.from(JSON.stringify(req.body ?? null)),
            authorization: req.headers.authorization,
            signal: ac.signal,
            ...(req.bodyAt === undefined ? {} : { receivedAt: req.bodyAt }),
          });
          // Nothing after the first byte needs the body: a stream may last minutes, and
          // the request object (with it) lives until the stream ends.
          req.body = undefined;
          req.rawBody = undefined;
          reply.hijack();
          await answer.relay(res);
        } catch (err) {
          if (err instanceof ClientGoneError) {
            reply.hijack();
            res.destroy();
            return;
          }
          if (err instanceof GatewayError) return sendGatewayError(reply, err);
          throw err;
        } finally {
          unwatch();
        }
      };

    scope.post("/v1/completions", { onRequest: guard }, handler("completion"));
    scope.post("/v1/chat/completions", { onRequest: guard }, handler("chat"));
    scope.get("/v1/models", { onRequest: guard }, async (req) =>
      gateway.models(req.headers.authorization),
    );
  });
}
