/**
 * The gateway's errors as HTTP answers, one shape for both ways a gateway request is
 * served (fastify's routes in `gateway-routes.ts`, the `node:http` listener in
 * `gateway-front.ts`): the API's one error set (`errors.ts`) in a shape OpenAI's clients
 * also read, `{ error: { code, message, type, param } }` (`code` and `message` as
 * everywhere in the API; `type` and `param` as OpenAI's), and `Retry-After` on a 429.
 * Every error on those routes has this shape, the HTTP layer's own too (401, 413, 415,
 * `invalid_json`, …): `openAiErrorBody` for what the gateway writes itself,
 * `openAiErrorPayload` for what fastify serialised.
 */

import type { GatewayError } from "../gateway/errors.js";
import { ERROR_CODES, type ErrorBody, type ErrorCode } from "./errors.js";

const OPENAI_TYPES: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  404: "not_found_error",
  429: "rate_limit_error",
};

export interface OpenAiErrorBody {
  readonly error: {
    code: ErrorCode;
    message: string;
    type: string;
    param: string | null;
    details?: unknown;
  };
}

export interface GatewayErrorAnswer {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: OpenAiErrorBody;
}

/** OpenAI's `type` for an HTTP status (another 4xx: the request's fault, as OpenAI says). */
function openAiType(status: number): string {
  return OPENAI_TYPES[status] ?? (status < 500 ? "invalid_request_error" : "api_error");
}

/** An API error body (`errors.ts`) with OpenAI's `type` and a null `param` added. */
export function openAiErrorBody(body: ErrorBody): OpenAiErrorBody {
  const { code, message, details } = body.error;
  const error = { code, message, type: openAiType(ERROR_CODES[code].status), param: null };
  return { error: details === undefined ? error : { ...error, details } };
}

/**
 * An error fastify serialised for a gateway route (its 401, 413, 415, a body that is not
 * JSON), as the same JSON with OpenAI's `type` and `param`; anything else unchanged.
 */
export function openAiErrorPayload(status: number, payload: unknown): unknown {
  if (status < 400 || typeof payload !== "string") return payload;
  let body: unknown;
  try {
    body = JSON.parse(payload);
  } catch {
    return payload;
  }
  const error = (body as { error?: unknown } | null)?.error;
  if (typeof error !== "object" || error === null || "type" in error) return payload;
  const e = error as Record<string, unknown>;
  const { code, message, ...rest } = e;
  return JSON.stringify({
    error: { code, message, type: openAiType(status), param: null, ...rest },
  });
}

export function gatewayErrorAnswer(err: GatewayError): GatewayErrorAnswer {
  const code: ErrorCode = err.code;
  const status = ERROR_CODES[code].status;
  return {
    status,
    headers: {
      ...(err.retryAfterS === null ? {} : { "retry-after": String(err.retryAfterS) }),
      // As the drain answers: the client reconnects elsewhere.
      ...(code === "shutting_down" ? { connection: "close" } : {}),
    },
    body: {
      error: { code, message: err.message, type: openAiType(status), param: err.param },
    },
  };
}
