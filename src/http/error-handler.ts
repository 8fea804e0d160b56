/**
 * Turns every failure into the one error body `{ error: { code, message, details? } }`:
 * our own `ApiError`s, schema failures (naming the field and the bad value), fastify's
 * body parsing errors (413, 415, bad JSON), unknown routes (404) and known paths called
 * with another method (405 with `Allow`). Anything else is a bug:
 * logged with its stack, answered with 500.
 */

import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { echoValue, preview } from "../util/truncate.js";
import { ApiError, ERROR_CODES, type ErrorCode, errorBody } from "./errors.js";
import type { RouteTable } from "./route-table.js";

interface SchemaIssue {
  readonly path: string;
  readonly message: string;
  readonly value?: unknown;
}

/** Look up a JSON pointer (`/token_ids/5`) in a parsed body; undefined when absent. */
function valueAt(root: unknown, pointer: string): unknown {
  let v: unknown = root;
  for (const raw of pointer.split("/").slice(1)) {
    if (typeof v !== "object" || v === null) return undefined;
    v = (v as Record<string, unknown>)[raw.replace(/~1/g, "/").replace(/~0/g, "~")];
  }
  return v;
}

/** A bad value as shown in a message: bounded, whatever its size or depth. */
function describe(v: unknown): string {
  return preview(v, 60);
}

/** One readable issue per failed schema rule; the bad value is included when there is one. */
function schemaIssues(err: FastifyError, req: FastifyRequest): SchemaIssue[] {
  const context = err.validationContext ?? "body";
  const input =
    context === "params" ? req.params : context === "querystring" ? req.query : req.body;
  return (err.validation ?? []).map((v) => {
    const params = v.params as Record<string, unknown>;
    if (v.keyword === "additionalProperties") {
      const name = String(params.additionalProperty);
      const path = `${context}${v.instancePath}/${name}`;
      return { path, message: `${path} is not an accepted property` };
    }
    if (v.keyword === "required") {
      const path = `${context}${v.instancePath}/${String(params.missingProperty)}`;
      return { path, message: `${path} is required` };
    }
    const path = `${context}${v.instancePath}`;
    const value = valueAt(input, v.instancePath);
    const shown =
      value === undefined || typeof value === "object" ? "" : ` (got ${describe(value)})`;
    // The value is echoed bounded: a 4 MB string or a deeply nested array must not be
    // serialised back (nor overflow the serialiser's stack).
    return {
      path,
      message: `${path} ${v.message ?? "is invalid"}${shown}`,
      value: echoValue(value),
    };
  });
}

/** "a prompt" / "messages" when a body carries text where token ids belong, else null. */
function textInsteadOfTokens(body: unknown): string | null {
  if (typeof body !== "object" || body === null || "token_ids" in body) return null;
  if ("prompt" in body || "text" in body) return "a prompt";
  if ("messages" in body) return "chat messages";
  return null;
}

function send(reply: FastifyReply, code: ErrorCode, message: string, details?: unknown) {
  return reply.status(ERROR_CODES[code].status).send(errorBody(code, message, details));
}

/**
 * Install the error and not-found handlers. `bodyLimit` and `maxPromptTokens` are for
 * messages; `routes` tells a wrong method (405) from an unknown path (404).
 */
export function installErrorHandling(
  app: FastifyInstance,
  limits: { readonly bodyLimitBytes: number; readonly maxPromptTokens: number },
  routes: RouteTable,
): void {
  app.setNotFoundHandler((req, reply) => {
    const path = req.url.split("?")[0]!;
    const allowed = routes.allowed(path);
    if (allowed.length > 0 && !allowed.includes(req.method)) {
      reply.header("allow", allowed.join(", "));
      return send(
        reply,
        "method_not_allowed",
        `${req.method} is not allowed on ${path}; allowed: ${allowed.join(", ")}`,
      );
    }
    return send(reply, "not_found", `no route ${req.method} ${path}`);
  });
  app.setErrorHandler((err: FastifyError, req, reply) => {
    if (err instanceof ApiError) return reply.status(err.status).send(err.body());
    if (err.validation !== undefined) {
      const issues = schemaIssues(err, req);
      const first = err.validation[0];
      if (first?.keyword === "minItems" && first.instancePath === "/token_ids") {
        return send(
          reply,
          "invalid_request",
          "body/token_ids is empty: a prompt needs at least one token id",
          issues,
        );
      }
      const text = textInsteadOfTokens(req.body);
      if (text !== null && issues.some((i) => i.path === "body/token_ids")) {
        return send(
          reply,
          "invalid_request",
          `body/token_ids is required: ${req.url.split("?")[0]} takes token ids, not ${text}; ` +
            "tokenize the prompt with the model's tokenizer first, or send OpenAI requests " +
            "to the gateway's /v1/completions and /v1/chat/completions, which tokenize and route them",
          issues,
        );
      }
      if (first?.keyword === "maxItems" && first.instancePath === "/token_ids") {
        const n = (req.body as { token_ids?: unknown[] }).token_ids?.length;
        return send(
          reply,
          "prompt_too_long",
          `token_ids has ${n} tokens; the limit is ${limits.maxPromptTokens} (server.maxPromptTokens)`,
        );
      }
      return send(reply, "invalid_request", issues.map((i) => i.message).join("; "), issues);
    }
    switch (err.code) {
      case "FST_ERR_CTP_BODY_TOO_LARGE":
        return send(
          reply,
          "body_too_large",
          `request body exceeds ${limits.bodyLimitBytes} bytes (server.bodyLimitBytes)`,
        );
      case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
        return send(
          reply,
          "unsupported_media_type",
          `content-type ${describe(req.headers["content-type"] ?? "(none)")} is not supported; send application/json`,
        );
      case "FST_ERR_CTP_EMPTY_JSON_BODY":
        return send(
          reply,
          "invalid_json",
          "the body is empty but content-type is application/json",
        );
      case "FST_ERR_CTP_INVALID_JSON_BODY":
        // fastify's own message repeats ours ("Body is not valid JSON but …").
        return send(reply, "invalid_json", "the body is not valid JSON");
    }
    if (err instanceof SyntaxError) {
      return send(reply, "invalid_json", `the body is not valid JSON (${err.message})`);
    }
    if (typeof err.statusCode === "number" && err.statusCode >= 400 && err.statusCode < 500) {
      return send(reply, "invalid_request", err.message);
    }
    req.log.error({ err, url: req.url, method: req.method }, "unhandled error in route");
    return send(reply, "internal_error", `internal error: ${err.message}`);
  });
}
