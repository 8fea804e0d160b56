/**
 * Bearer-token guards: `server.authToken` for the routes that change the fleet,
 * `server.decisionToken` for the decision API (`/v1/route`, `/v1/match`) and the
 * lifecycle reports. With no token configured a guard is open (the default binds to
 * loopback only, and a non-loopback address needs `server.authToken`); with one, a
 * missing or different token is a 401. The comparison takes the same time whatever the
 * token's content.
 */

import { createHash, timingSafeEqual } from "node:crypto";
import type { FastifyRequest } from "fastify";
import { ApiError } from "./errors.js";

const digest = (s: string) => createHash("sha256").update(s).digest();

/**
 * The check behind the guard: the error a request with this `Authorization` header gets,
 * or null when it may pass (always, with no token configured).
 */
export function bearerCheck(
  token: string | null,
  key = "server.authToken",
): (header: string | undefined) => ApiError | null {
  const expected = token === null ? null : digest(token);
  return (header) => {
    if (expected === null) return null;
    if (header === undefined) {
      return new ApiError(
        "unauthorized",
        `this route needs an Authorization: Bearer <token> header (${key} is set)`,
      );
    }
    const m = /^Bearer\s+(.+)$/i.exec(header);
    if (m === null) {
      return new ApiError("unauthorized", "the Authorization header must be 'Bearer <token>'");
    }
    if (!timingSafeEqual(digest(m[1]!.trim()), expected)) {
      return new ApiError("unauthorized", `the bearer token is not the configured ${key}`);
    }
    return null;
  };
}

/**
 * An `onRequest` hook requiring `Authorization: Bearer <token>`; null token = no check.
 * `onRequest` runs before the body is parsed or validated, so an unauthenticated caller
 * gets a 401 and never learns the route's schema from a 400.
 */
export function requireBearer(token: string | null, key = "server.authToken") {
  const check = bearerCheck(token, key);
  return async (req: FastifyRequest): Promise<void> => {
    const err = check(req.headers.authorization);
    if (err !== null) throw err;
  };
}
