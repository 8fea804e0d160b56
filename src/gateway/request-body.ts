/**
 * What the gateway reads from an OpenAI request body: the model, whether it streams, and
 * the prompt to tokenize. Only those fields are checked (a wrong type is a 400 naming the
 * field); every other field passes through to the worker untouched, because the body the
 * worker receives is the client's own bytes.
 */

import { type ChatRequestLike, chatRequestOf } from "../tokenize/types.js";
import { GatewayError } from "./errors.js";

export type GatewayKind = "completion" | "chat";

/** A completion prompt the router can key: text to tokenize, token ids, or none (batch). */
export type CompletionPrompt =
  | { readonly kind: "text"; readonly text: string }
  | { readonly kind: "tokens"; readonly tokens: ArrayLike<number> }
  | { readonly kind: "batch"; readonly count: number };

export interface GatewayRequest {
  readonly kind: GatewayKind;
  readonly model: string | null;
  readonly stream: boolean;
  /** `stream_options.include_usage`: the stream ends with a usage chunk. */
  readonly includeUsage: boolean;
  readonly prompt: CompletionPrompt | null;
  readonly chat: ChatRequestLike | null;
  /** vLLM's `cache_salt`: the engine keys this request's blocks under it. */
  readonly cacheSalt: string | null;
  /** A completion's `add_special_tokens` (vLLM: default true). Chats carry theirs in `chat`. */
  readonly addSpecialTokens: boolean;
}

type Body = Record<string, unknown>;

const bad = (param: string, message: string) =>
  new GatewayError("invalid_request", `body/${param} ${message}`, param);

const isObject = (v: unknown): v is Body =>
  typeof v === "object" && v !== null && !Array.isArray(v);

const TOKEN_ID_LIMIT = 2 ** 31;

/** A non-empty array of integers in [0, 2^31). A plain loop: prompts run to 100k ids. */
function isTokenIds(v: unknown): v is number[] {
  if (!Array.isArray(v) || v.length === 0) return false;
  for (let i = 0; i < v.length; i++) {
    const t: unknown = v[i];
    if (typeof t !== "number" || !Number.isInteger(t) || t < 0 || t >= TOKEN_ID_LIMIT) {
      return false;
    }
  }
  return true;
}

function optional<T>(b: Body, key: string, ok: (v: unknown) => v is T, what: string): T | null {
  const v = b[key];
  if (v === undefined || v === null) return null;
  if (!ok(v)) throw bad(key, `must be ${what}`);
  return v;
}

const isString = (v: unknown): v is string => typeof v === "string";
const isBool = (v: unknown): v is boolean => typeof v === "boolean";
const isArray = (v: unknown): v is unknown[] => Array.isArray(v);

/** Validate the fields the gateway uses; throws `GatewayError("invalid_request")`. */
export function parseGatewayRequest(kind: GatewayKind, body: unknown): GatewayRequest {
  if (!isObject(body)) {
    throw new GatewayError("invalid_request", "the body must be a JSON object", null);
  }
  const model = optional(body, "model", isString, "a string");
  const stream = optional(body, "stream", isBool, "a boolean") ?? false;
  const so = optional(body, "stream_options", isObject, "an object");
  let includeUsage = false;
  if (so !== null) {
    const iu = so.include_usage;
    if (iu !== undefined && iu !== null && typeof iu !== "boolean") {
      throw bad("stream_options/include_usage", "must be a boolean");
    }
    includeUsage = iu === true;
  }
  const cacheSalt = optional(body, "cache_salt", isString, "a string");
  if (cacheSalt === "") throw bad("cache_salt", "must be a non-empty string");
  const addSpecialTokens =
    kind === "completion"
      ? (optional(body, "add_special_tokens", isBool, "a boolean") ?? true)
      : false;
  const common = { kind, model, stream, includeUsage, cacheSalt, addSpecialTokens };
  if (kind === "completion") return { ...common, prompt: parsePrompt(body.prompt), chat: null };
  return { ...common, prompt: null, chat: parseChat(body) };
}

function parsePrompt(v: unknown): CompletionPrompt {
  if (v === undefined || v === null) throw bad("prompt", "is required");
  if (typeof v === "string") return { kind: "text", text: v };
  // Read from the body's bytes by `parseTokenIdBody` (non-empty, each in [0, 2^31)).
  if (v instanceof Int32Array && v.length > 0) return { kind: "tokens", tokens: v };
  if (isTokenIds(v)) return { kind: "tokens", tokens: v };
  if (Array.isArray(v) && v.length > 0) {
    if (v.length === 1 && typeof v[0] === "string") return { kind: "text", text: v[0] };
    if (v.length === 1 && isTokenIds(v[0])) return { kind: "tokens", tokens: v[0] };
    if (v.every((p) => typeof p === "string" || isTokenIds(p))) {
      return { kind: "batch", count: v.length };
    }
  }
  throw bad(
    "prompt",
    "must be a string, an array of token ids (integers in [0, 2^31)), or an array of those",
  );
}

function parseChat(b: Body): ChatRequestLike {
  const messages = b.messages;
  if (!Array.isArray(messages) || messages.length === 0) {
    throw bad("messages", "must be a non-empty array");
  }
  messages.forEach((m, i) => {
    if (!isObject(m)) throw bad(`messages/${i}`, "must be an object");
    if (typeof m.role !== "string" || m.role === "") {
      throw bad(`messages/${i}/role`, "must be a non-empty string");
    }
    const c = m.content;
    if (c !== undefined && c !== null && typeof c !== "string" && !Array.isArray(c)) {
      throw bad(`messages/${i}/content`, "must be a string, an array of parts, or null");
    }
  });
  optional(b, "tools", isArray, "an array");
  optional(b, "chat_template_kwargs", isObject, "an object");
  optional(b, "add_generation_prompt", isBool, "a boolean");
  optional(b, "continue_final_message", isBool, "a boolean");
  optional(b, "documents", isArray, "an array");
  optional(b, "reasoning_effort", isString, "a string");
  optional(b, "chat_template", isString, "a string");
  optional(b, "add_special_tokens", isBool, "a boolean");
  // The same function reads the fields again from the body's bytes on a tokenizer thread.
  return chatRequestOf(b);
}
