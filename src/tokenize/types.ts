/**
 * The gateway's tokenization contract: what a prompt tokenizer takes (an OpenAI request as
 * the client sent it) and returns (the token ids the engine will prefill), plus the closed
 * set of errors it raises. Local (`LocalTokenizer`) and remote (`RemoteTokenizer`)
 * implementations are interchangeable behind `PromptTokenizer`.
 */

export interface TokenizeResult {
  readonly tokenIds: readonly number[];
  /** Segments served from the segment cache (local tokenizer only). */
  readonly cachedSegments?: number;
  /** Tokenized on a worker thread (local tokenizer only; absent: on the caller's thread). */
  readonly onThread?: boolean;
  /**
   * The same ids as they arrived from a worker thread: reading these instead of
   * `tokenIds` (made from them on first read) spares the copy into an array.
   */
  readonly ids?: Int32Array;
}

export interface ChatRequestLike {
  /** OpenAI messages as the client sent them. */
  readonly messages: readonly unknown[];
  readonly tools?: readonly unknown[];
  readonly chat_template_kwargs?: Readonly<Record<string, unknown>>;
  /** Default true (vLLM). */
  readonly add_generation_prompt?: boolean;
  /** vLLM; default false. */
  readonly continue_final_message?: boolean;
  readonly documents?: readonly unknown[];
  /** vLLM passes it to the template and derives `enable_thinking` from it. */
  readonly reasoning_effort?: string;
  /** The request's own template (vLLM: only with --trust-request-chat-template). */
  readonly chat_template?: string;
  /** vLLM; default false for chats (true adds e.g. a BOS on top of the template's). */
  readonly add_special_tokens?: boolean;
}

/**
 * The chat fields of a parsed request body, as `tokenizeChat` takes them: `messages` and
 * the template's optional fields, a null one left out. No checks (the caller's, before).
 */
export function chatRequestOf(body: Readonly<Record<string, unknown>>): ChatRequestLike {
  const out: Record<string, unknown> = { messages: body.messages };
  for (const k of CHAT_OPTIONAL_FIELDS) {
    const v = body[k];
    if (v !== undefined && v !== null) out[k] = v;
  }
  return out as unknown as ChatRequestLike;
}

const CHAT_OPTIONAL_FIELDS = [
  "tools",
  "chat_template_kwargs",
  "add_generation_prompt",
  "continue_final_message",
  "documents",
  "reasoning_effort",
  "chat_template",
  "add_special_tokens",
] as const satisfies readonly (keyof ChatRequestLike)[];

export interface PromptTokenizer {
  readonly model: string;
  /**
   * /v1/completions prompt text. vLLM adds special tokens (e.g. a BOS, as the tokenizer
   * config says) unless the request's `add_special_tokens` is false.
   */
  tokenizeCompletion(prompt: string, addSpecialTokens?: boolean): Promise<TokenizeResult>;
  /**
   * /v1/chat/completions: render the chat template as vLLM's OpenAI server does, then
   * encode with add_special_tokens=false. `body`, when given, is the JSON body `request`
   * was read from (`chatRequestOf` of its parse is `request`): a tokenizer working on
   * another thread may send those bytes there instead of copying the objects.
   */
  tokenizeChat(request: ChatRequestLike, body?: Uint8Array): Promise<TokenizeResult>;
  close(): Promise<void>;
}

/** Stable codes a caller can count by (`kvrouter_tokenize_errors_total{code}`). */
export type TokenizeErrorCode =
  /** A model directory's file is missing, not JSON, or lacks/has a bad key. */
  | "model_files"
  /** The request cannot be rendered: bad messages, template error, bad kwargs. */
  | "bad_request"
  /** The remote worker did not answer in time. */
  | "timeout"
  /** The remote worker could not be reached. */
  | "unreachable"
  /** The remote worker answered with a non-2xx status. */
  | "http_status"
  /** The remote worker's answer has no usable `tokens`. */
  | "bad_response"
  /** The tokenizer was closed. */
  | "closed";

export class TokenizeError extends Error {
  override readonly name = "TokenizeError";
  constructor(
    readonly code: TokenizeErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
