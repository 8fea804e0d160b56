/**
 * Bearer-token guard for the routes that change the fleet. With no token configured the
 * guard is open (the default binds to loopback only); with one, a missing or different
 * token is a 401. The comparison takes the same time whatever the token's content.
 */

import { createHash, timingSafeEqual } from "node:crypto";
import type { FastifyRequest } from "fastify";
import { ApiError } from "./errors.js";

const digest = (s: string) => createHash("sha256").update(s).digest();

/**
 * An `onRequest` hook requiring `Authorization: Bearer <token>`; null token = no check.
 * `onRequest` runs before the body is parsed or validated, so an unauthenticated caller
 * gets a 401 and never learns the route's schema from a 400.
 */
export function requireBearer(token: string | null, key = "server.authToken") {
  const expected = token === null ? null : digest(token);
  return async (req: FastifyRequest): Promise<void> => {
    if (expected === null) return;
    const header = req.headers.authorization;
    if (header === undefined) {
      throw new ApiError(
        "unauthorized",
        "this route needs an Authorization: Bearer <token> header",
      );
    }
    const m = /^Bearer\s+(.+)$/i.exec(header);
    if (m === null) {
      throw new ApiError("unauthorized", "the Authorization header must be 'Bearer <token>'");
    }
    if (!timingSafeEqual(digest(m[1]!.trim()), expected)) {
      throw new ApiError("unauthorized", `the bearer token is not the configured ${key}`);
    }
  };
}
