/**
 * Validation of the OpenAI-shaped request bodies the simulated worker accepts, with errors
 * that name the offending field. Sampling parameters (temperature, top_p, …) are accepted
 * and ignored: the simulator's output is deterministic.
 */

import type { ChatMessage } from "./tokenizer.js";

/** A 4xx answer, rendered in vLLM's error shape. */
export class SimHttpError extends Error {
  constructor(
    readonly statusCode: number,
    message: string,
    readonly param: string | null = null,
  ) {
    super(message);
  }
}

/** Default `max_tokens` when a request does not say (OpenAI's completions default). */
export const DEFAULT_MAX_TOKENS = 16;

export type PromptInput = { kind: "text"; text: string } | { kind: "tokens"; tokens: number[] };

export interface GenerationParams {
  readonly model: string | null;
  readonly maxTokens: number;
  readonly stream: boolean;
  readonly includeUsage: boolean;
}

export interface CompletionRequest extends GenerationParams {
  readonly prompt: PromptInput;
}

export interface ChatRequest extends GenerationParams {
  readonly messages: ChatMessage[];
}

type Body = Record<string, unknown>;

function bad(message: string, param: string | null = null): SimHttpError {
  return new SimHttpError(400, message, param);
}

export function asBody(body: unknown): Body {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw bad("request body must be a JSON object");
  }
  return body as Body;
}

function isTokenArray(v: unknown): v is number[] {
  return (
    Array.isArray(v) &&
    v.length > 0 &&
    v.every((t) => Number.isInteger(t) && (t as number) >= 0 && (t as number) < 2 ** 31)
  );
}

/** `prompt`: a string, a token id array, or a one-element array of either. */
export function parsePrompt(v: unknown, field = "prompt"): PromptInput {
  if (v === undefined) throw bad(`'${field}' is required`, field);
  if (typeof v === "string") {
    if (v.length === 0) throw bad(`'${field}' must not be empty`, field);
    return { kind: "text", text: v };
  }
  if (Array.isArray(v) && v.length === 1 && (typeof v[0] === "string" || Array.isArray(v[0]))) {
    if (Array.isArray(v[0]) || (v[0] as string).length > 0) return parsePrompt(v[0], field);
  }
  if (isTokenArray(v)) return { kind: "tokens", tokens: v.slice() };
  if (
    Array.isArray(v) &&
    v.length > 1 &&
    v.every((p) => typeof p === "string" || Array.isArray(p))
  ) {
    throw bad(
      `'${field}' holds ${v.length} prompts; the simulator serves one prompt per request`,
      field,
    );
  }
  throw bad(
    `'${field}' must be a non-empty string or a non-empty array of integer token ids in [0, 2^31)`,
    field,
  );
}

function parseParams(b: Body, maxTokensFields: readonly string[]): GenerationParams {
  const model = b.model;
  if (model !== undefined && model !== null && typeof model !== "string") {
    throw bad("'model' must be a string", "model");
  }
  let maxTokens = DEFAULT_MAX_TOKENS;
  for (const f of maxTokensFields) {
    const v = b[f];
    if (v === undefined || v === null) continue;
    if (!Number.isInteger(v) || (v as number) < 1) {
      throw bad(`'${f}' must be an integer ≥ 1, got ${JSON.stringify(v)}`, f);
    }
    maxTokens = v as number;
    break;
  }
  const stream = b.stream;
  if (stream !== undefined && stream !== null && typeof stream !== "boolean") {
    throw bad("'stream' must be a boolean", "stream");
  }
  const n = b.n;
  if (n !== undefined && n !== null && n !== 1) {
    throw bad(`'n' must be 1 (the simulator returns one choice), got ${JSON.stringify(n)}`, "n");
  }
  const so = b.stream_options;
  let includeUsage = false;
  if (so !== undefined && so !== null) {
    if (typeof so !== "object" || Array.isArray(so)) {
      throw bad("'stream_options' must be an object", "stream_options");
    }
    const iu = (so as Body).include_usage;
    if (iu !== undefined && iu !== null && typeof iu !== "boolean") {
      throw bad("'stream_options.include_usage' must be a boolean", "stream_options.include_usage");
    }
    includeUsage = iu === true;
  }
  return {
    model: (model as string | null | undefined) ?? null,
    maxTokens,
    stream: stream === true,
    includeUsage,
  };
}

export function parseCompletionRequest(body: unknown): CompletionRequest {
  const b = asBody(body);
  return { ...parseParams(b, ["max_tokens"]), prompt: parsePrompt(b.prompt) };
}

/** `messages`: role + content (a string, or an array of `{type: "text", text}` parts). */
export function parseMessages(v: unknown): ChatMessage[] {
  if (!Array.isArray(v) || v.length === 0) {
    throw bad("'messages' must be a non-empty array", "messages");
  }
  return v.map((m, i) => {
    const where = `messages[${i}]`;
    if (typeof m !== "object" || m === null || Array.isArray(m)) {
      throw bad(`'${where}' must be an object`, where);
    }
    const { role, content } = m as Body;
    if (typeof role !== "string" || role.length === 0) {
      throw bad(`'${where}.role' must be a non-empty string`, `${where}.role`);
    }
    if (typeof content === "string") return { role, content };
    if (content === null || content === undefined) return { role, content: "" };
    if (Array.isArray(content)) {
      const texts = content.map((p, j) => {
        const part = p as Body | null;
        if (
          part === null ||
          typeof part !== "object" ||
          part.type !== "text" ||
          typeof part.text !== "string"
        ) {
          throw bad(
            `'${where}.content[${j}]' must be {"type": "text", "text": string}; other parts are not supported`,
            `${where}.content`,
          );
        }
        return part.text;
      });
      return { role, content: texts.join("\n") };
    }
    throw bad(`'${where}.content' must be a string or an array of text parts`, `${where}.content`);
  });
}

export function parseChatRequest(body: unknown): ChatRequest {
  const b = asBody(body);
  return {
    ...parseParams(b, ["max_completion_tokens", "max_tokens"]),
    messages: parseMessages(b.messages),
  };
}

/** `/tokenize`: `{prompt}` or `{messages, add_generation_prompt?}`. */
export type TokenizeRequest =
  | { kind: "prompt"; model: string | null; prompt: PromptInput }
  | { kind: "chat"; model: string | null; messages: ChatMessage[]; addGenerationPrompt: boolean };

export function parseTokenizeRequest(body: unknown): TokenizeRequest {
  const b = asBody(body);
  const model = b.model;
  if (model !== undefined && model !== null && typeof model !== "string") {
    throw bad("'model' must be a string", "model");
  }
  const m = (model as string | null | undefined) ?? null;
  if (b.messages !== undefined) {
    if (b.prompt !== undefined) throw bad("give either 'prompt' or 'messages', not both");
    const agp = b.add_generation_prompt;
    if (agp !== undefined && typeof agp !== "boolean") {
      throw bad("'add_generation_prompt' must be a boolean", "add_generation_prompt");
    }
    return {
      kind: "chat",
      model: m,
      messages: parseMessages(b.messages),
      addGenerationPrompt: agp !== false,
    };
  }
  if (b.prompt === undefined) throw bad("'prompt' or 'messages' is required", "prompt");
  return { kind: "prompt", model: m, prompt: parsePrompt(b.prompt) };
}
