/**
 * The gateway's errors as HTTP answers, one shape for both ways a gateway request is
 * served (fastify's routes in `gateway-routes.ts`, the `node:http` listener in
 * `gateway-front.ts`): the API's one error set (`errors.ts`) in a shape OpenAI's clients
 * also read, `{ error: { code, message, type, param } }` (`code` and `message` as
 * everywhere in the API; `type` and `param` as OpenAI's), and `Retry-After` on a 429.
 */

import type { GatewayError } from "../gateway/errors.js";
import { ERROR_CODES, type ErrorCode } from "./errors.js";

const OPENAI_TYPES: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  404: "not_found_error",
  429: "rate_limit_error",
};

export interface GatewayErrorAnswer {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: {
    readonly error: { code: ErrorCode; message: string; type: string; param: string | null };
  };
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
      error: {
        code,
        message: err.message,
        type: OPENAI_TYPES[status] ?? "api_error",
        param: err.param,
      },
    },
  };
}
