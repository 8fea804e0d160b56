/**
 * The gateway's closed set of failures, as codes of the HTTP API's error set
 * (`src/http/errors.ts` maps each to its status). `param` names the offending body field
 * (OpenAI's error shape has it); `retryAfterS` goes out as `Retry-After` on a 429.
 */

export type GatewayErrorCode =
  | "invalid_request"
  | "model_not_found"
  | "no_worker_available"
  | "rate_limited"
  | "shutting_down"
  | "upstream_error"
  | "upstream_timeout";

export class GatewayError extends Error {
  override readonly name = "GatewayError";

  constructor(
    readonly code: GatewayErrorCode,
    message: string,
    readonly param: string | null = null,
    readonly retryAfterS: number | null = null,
  ) {
    super(message);
  }
}

/** The client went away before an answer started: nothing is sent. */
export class ClientGoneError extends Error {
  override readonly name = "ClientGoneError";
  /** Says nothing about the worker (see `breakers.ts`). */
  readonly inconclusive = true;
}
