/**
 * JSON bodies are checked for nesting depth before they are parsed (`util/json-depth.ts`).
 * Each route may declare its depth in its config (`config: { maxJsonDepth: 3 }`); other
 * routes get `server.maxJsonDepth`. The gateway's two POST routes parse their bodies
 * themselves, with the same check (`gateway-serve.ts`).
 */

import type { FastifyInstance, FastifyRequest } from "fastify";
import { jsonDepthExceeds, jsonTooDeepMessage } from "../util/json-depth.js";
import { clip } from "../util/truncate.js";
import { ApiError } from "./errors.js";

/** Route config key read by the parser. */
export interface JsonDepthConfig {
  readonly maxJsonDepth?: number;
}

/** Replace fastify's JSON parser by one that checks depth first (same limits otherwise). */
export function installJsonParser(app: FastifyInstance, defaultMaxDepth: number): void {
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser(
    "application/json",
    { parseAs: "buffer" },
    (
      req: FastifyRequest,
      body: string | Buffer,
      done: (err: Error | null, v?: unknown) => void,
    ) => {
      const bytes = typeof body === "string" ? Buffer.from(body) : body;
      if (bytes.length === 0) {
        done(
          new ApiError("invalid_json", "the body is empty but content-type is application/json"),
        );
        return;
      }
      const max =
        (req.routeOptions.config as JsonDepthConfig | undefined)?.maxJsonDepth ?? defaultMaxDepth;
      if (jsonDepthExceeds(bytes, max)) {
        done(new ApiError("json_too_deep", jsonTooDeepMessage(max)));
        return;
      }
      try {
        done(null, JSON.parse(bytes.toString("utf8")));
      } catch (err) {
        done(
          new ApiError(
            "invalid_json",
            `the body is not valid JSON: ${clip(err instanceof Error ? err.message : String(err), 200)}`,
          ),
        );
      }
    },
  );
}
