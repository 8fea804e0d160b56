/**
 * One gateway request from its bytes to its end, for both ways one is served: the
 * `node:http` listener ahead of fastify (`gateway-front.ts`) and fastify's routes
 * (`gateway-routes.ts`: what the listener hands over, and `app.inject()`). One sequence,
 * so the two answer alike by construction:
 *
 * - `readGatewayBody`: the depth check every JSON body of the API gets, before it is
 *   parsed (`server.maxJsonDepth`: these routes declare no depth of their own, a chat's
 *   `tools` carry JSON schemas), then `parseGatewayBody` (a completion's token ids read
 *   from the bytes); failures are 400 `json_too_deep` / `invalid_json`.
 * - `serveGatewayRequest`: abort the upstream when the client leaves, `gateway.handle`,
 *   drop the body at the first byte (a stream may last minutes), relay; a gateway error
 *   in its OpenAI shape (`gateway-answer.ts`), a client gone destroys the response, and
 *   anything else is a bug: logged, 500 `internal_error` (or the stream cut, if it had
 *   started).
 */

import type { ServerResponse } from "node:http";
import { watchClient } from "../gateway/client-watch.js";
import { ClientGoneError, GatewayError } from "../gateway/errors.js";
import type { Gateway } from "../gateway/gateway.js";
import type { GatewayKind } from "../gateway/request-body.js";
import { parseGatewayBody } from "../gateway/token-id-body.js";
import { jsonDepthExceeds, jsonTooDeepMessage } from "../util/json-depth.js";
import type { LogSink } from "../util/log-sink.js";
import { ApiError, errorBody } from "./errors.js";
import { gatewayErrorAnswer, openAiErrorBody } from "./gateway-answer.js";

/** The body of a gateway request from its bytes; throws `ApiError` (400) when it is not one. */
export function readGatewayBody(raw: Buffer, kind: GatewayKind, maxDepth: number): unknown {
  if (jsonDepthExceeds(raw, maxDepth)) {
    throw new ApiError("json_too_deep", jsonTooDeepMessage(maxDepth));
  }
  try {
    return parseGatewayBody(raw, kind === "completion");
  } catch (err) {
    throw new ApiError("invalid_json", `the body is not valid JSON (${messageOf(err)})`);
  }
}

/** A JSON answer as fastify's `reply.send(object)` writes it. */
export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    ...headers,
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(text),
  });
  res.end(text);
}

export interface GatewayServing {
  readonly kind: GatewayKind;
  /**
   * The parsed body and the client's bytes, until the first byte is relayed: then both
   * are dropped here (held in an object, not in locals, which a suspended async function
   * keeps).
   */
  readonly held: { body: unknown; raw: Buffer | undefined };
  readonly authorization: string | undefined;
  /** `performance.now()` when the body had arrived. */
  readonly receivedAt: number | undefined;
  /** Drop the caller's own references to the body (fastify's request holds it too). */
  readonly release?: () => void;
  /** Take the response from the framework before anything is written (`reply.hijack()`). */
  readonly takeOver?: () => void;
  /** For the log line of a bug. */
  readonly url: string | undefined;
  readonly logger: LogSink;
}

/** Serve one parsed gateway request on `res`; resolves when its answer has ended. Never rejects. */
export async function serveGatewayRequest(
  gateway: Gateway,
  res: ServerResponse,
  s: GatewayServing,
): Promise<void> {
  const ac = new AbortController();
  const unwatch = watchClient(res, () => ac.abort());
  try {
    const answer = await gateway.handle({
      kind: s.kind,
      body: s.held.body,
      raw: s.held.raw!,
      authorization: s.authorization,
      signal: ac.signal,
      ...(s.receivedAt === undefined ? {} : { receivedAt: s.receivedAt }),
    });
    s.held.body = undefined;
    s.held.raw = undefined;
    s.release?.();
    s.takeOver?.();
    await answer.relay(res);
  } catch (err) {
    s.takeOver?.();
    if (err instanceof ClientGoneError) {
      res.destroy();
      return;
    }
    if (res.headersSent) {
      // Not reachable through `relay` (which never rejects); the stream cannot be answered.
      s.logger.error({ err, url: s.url, method: "POST" }, "unhandled error in route");
      res.destroy();
      return;
    }
    if (err instanceof GatewayError) {
      const a = gatewayErrorAnswer(err);
      sendJson(res, a.status, a.body, a.headers);
      return;
    }
    if (err instanceof ApiError) {
      sendJson(res, err.status, openAiErrorBody(err.body()));
      return;
    }
    s.logger.error({ err, url: s.url, method: "POST" }, "unhandled error in route");
    const body = errorBody("internal_error", `internal error: ${messageOf(err)}`);
    sendJson(res, 500, openAiErrorBody(body));
  } finally {
    unwatch();
  }
}

/** An error's message, or the thrown value as text (a rejection need not be an Error). */
function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
