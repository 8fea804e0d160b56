/**
 * Every error the HTTP API can answer with, in one place: a stable machine code, its
 * HTTP status and what it means. Codes are part of the API: never rename or reuse one.
 * Bodies are always `{ error: { code, message, details? } }`.
 */

export const ERROR_CODES = {
  invalid_request: { status: 400, meaning: "the body, params or query fail the route's schema" },
  invalid_json: { status: 400, meaning: "the body is not valid JSON" },
  json_too_deep: {
    status: 400,
    meaning: "the body nests deeper than the route's schema allows (server.maxJsonDepth elsewhere)",
  },
  bad_request: { status: 400, meaning: "the HTTP request itself is malformed" },
  prompt_too_long: { status: 400, meaning: "more tokens than server.maxPromptTokens" },
  invalid_worker: {
    status: 400,
    meaning: "a worker declaration breaks a rule (details list each)",
  },
  unauthorized: {
    status: 401,
    meaning: "missing or wrong bearer token (server.authToken or server.decisionToken)",
  },
  not_found: { status: 404, meaning: "no such route" },
  request_not_found: { status: 404, meaning: "no in-flight request with this id" },
  worker_not_found: { status: 404, meaning: "no worker with this id" },
  method_not_allowed: { status: 405, meaning: "the route exists but not with this method" },
  request_timeout: {
    status: 408,
    meaning: "headers or body not received within server.headersTimeoutMs / requestTimeoutMs",
  },
  worker_exists: { status: 409, meaning: "a worker with this id is already registered" },
  duplicate_request: { status: 409, meaning: "request_id is already in flight" },
  events_over_zmq: {
    status: 409,
    meaning: "the worker's KV events come over ZeroMQ (events_endpoint): HTTP pushes are refused",
  },
  model_not_found: { status: 404, meaning: "gateway: no registered worker serves this model" },
  rate_limited: {
    status: 429,
    meaning: "gateway: every candidate is busy and the admission queue is full or timed out",
  },
  body_too_large: { status: 413, meaning: "the body exceeds server.bodyLimitBytes" },
  unsupported_media_type: { status: 415, meaning: "the body is not application/json" },
  headers_too_large: { status: 431, meaning: "the request line and headers are too large" },
  internal_error: { status: 500, meaning: "a bug: the message says what failed" },
  upstream_error: {
    status: 502,
    meaning: "gateway: every attempt failed before the first byte (connect error, 5xx, 429)",
  },
  no_worker_available: { status: 503, meaning: "no routable worker for this model" },
  not_ready: { status: 503, meaning: "no worker has fresh load information yet" },
  no_fresh_worker: {
    status: 503,
    meaning: "every candidate's load is stale and server.onAllStale is reject",
  },
  shutting_down: {
    status: 503,
    meaning: "the router is draining (SIGTERM); sent with Connection: close",
  },
  upstream_timeout: {
    status: 504,
    meaning: "gateway: the last attempt timed out (connect or first byte)",
  },
} as const satisfies Record<string, { status: number; meaning: string }>;

export type ErrorCode = keyof typeof ERROR_CODES;

/** The JSON body of every error response. */
export interface ErrorBody {
  readonly error: {
    readonly code: ErrorCode;
    readonly message: string;
    readonly details?: unknown;
  };
}

/** Thrown by handlers; the app's error handler turns it into the body above. */
export class ApiError extends Error {
  readonly status: number;

  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: unknown,
  ) {
    super(message);
    this.name = "ApiError";
    this.status = ERROR_CODES[code].status;
  }

  body(): ErrorBody {
    return errorBody(this.code, this.message, this.details);
  }
}

export function errorBody(code: ErrorCode, message: string, details?: unknown): ErrorBody {
  return { error: details === undefined ? { code, message } : { code, message, details } };
}
