/**
 * JSON bodies are checked for nesting depth before they are parsed: a 4 MB body of
 * `[[[[…` costs half a second of event loop to parse and then to report, and no route's
 * schema accepts more than a few levels. Each route may declare its depth in its config
 * (`config: { maxJsonDepth: 3 }`); other routes get `server.maxJsonDepth`. The check
 * first counts `[` and `{` with the native `indexOf` and only scans (string-aware) when
 * there are more openers than the limit, so a token-id body costs two `indexOf` calls.
 */

import type { FastifyInstance, FastifyRequest } from "fastify";
import { clip } from "../util/truncate.js";
import { ApiError } from "./errors.js";

/** Route config key read by the parser. */
export interface JsonDepthConfig {
  readonly maxJsonDepth?: number;
}

/** Whether the JSON text nests arrays/objects deeper than `max` (brackets in strings ignored). */
export function jsonDepthExceeds(text: string, max: number): boolean {
  if (countOpeners(text, max + 1) <= max) return false;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
      continue;
    }
    if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}

/** Occurrences of `[` plus `{`, counting no further than `stop`. */
function countOpeners(text: string, stop: number): number {
  let n = 0;
  for (const ch of ["[", "{"]) {
    for (let i = text.indexOf(ch); i !== -1 && n < stop; i = text.indexOf(ch, i + 1)) n++;
  }
  return n;
}

/** Replace fastify's JSON parser by one that checks depth first (same limits otherwise). */
export function installJsonParser(app: FastifyInstance, defaultMaxDepth: number): void {
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser(
    "application/json",
    { parseAs: "string" },
    (
      req: FastifyRequest,
      body: string | Buffer,
      done: (err: Error | null, v?: unknown) => void,
    ) => {
      const text = typeof body === "string" ? body : body.toString("utf8");
      if (text.length === 0) {
        done(
          new ApiError("invalid_json", "the body is empty but content-type is application/json"),
        );
        return;
      }
      const max =
        (req.routeOptions.config as JsonDepthConfig | undefined)?.maxJsonDepth ?? defaultMaxDepth;
      if (jsonDepthExceeds(text, max)) {
        done(
          new ApiError(
            "json_too_deep",
            `the body nests arrays/objects deeper than ${max} levels, more than this route accepts`,
          ),
        );
        return;
      }
      try {
        done(null, JSON.parse(text));
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
