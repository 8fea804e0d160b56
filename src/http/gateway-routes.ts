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
 * From the body's bytes on, both run one sequence (`gateway-serve.ts`).
 */

import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Gateway } from "../gateway/gateway.js";
import type { GatewayKind } from "../gateway/request-body.js";
import { requireBearer } from "./auth.js";
import { openAiErrorPayload } from "./gateway-answer.js";
import { gatewayRouteKind } from "./gateway-front.js";
import { readGatewayBody, serveGatewayRequest } from "./gateway-serve.js";

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
  maxJsonDepth: number,
): void {
  const guard = requireBearer(authToken, "gateway.authToken");
  app.register(async (scope) => {
    // What fastify answers here itself (a 401, 413, 415, a body that is not JSON) gets
    // OpenAI's `type` and `param`, as the gateway's own errors have them.
    scope.addHook("onSend", async (_req, reply, payload) =>
      openAiErrorPayload(reply.statusCode, payload),
    );
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
        // The raw URL, not `routeOptions`, which builds an object per read (either parse
        // gives the same body, so a URL this misses is only parsed the slower way).
        done(null, readGatewayBody(buf, gatewayRouteKind(req.url) ?? "chat", maxJsonDepth));
      } catch (err) {
        done(err as Error);
      }
    });

    const handler = (kind: GatewayKind) => (req: FastifyRequest, reply: FastifyReply) =>
      serveGatewayRequest(gateway, reply.raw, {
        kind,
        held: { body: req.body, raw: req.rawBody ?? Buffer.from(JSON.stringify(req.body ?? null)) },
        authorization: req.headers.authorization,
        receivedAt: req.bodyAt,
        // The request object (with the body) lives until the stream ends.
        release: () => {
          req.body = undefined;
          req.rawBody = undefined;
        },
        takeOver: () => reply.hijack(),
        url: req.url,
        logger: req.log,
      });

    scope.post("/v1/completions", { onRequest: guard }, handler("completion"));
    scope.post("/v1/chat/completions", { onRequest: guard }, handler("chat"));
    scope.get("/v1/models", { onRequest: guard }, async (req) =>
      gateway.models(req.headers.authorization),
    );
  });
}
