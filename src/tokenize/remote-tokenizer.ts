/**
 * `RemoteTokenizer`: asks a worker's vLLM-compatible `POST /tokenize` for the ids, for models
 * the gateway has no local files for. The timeout is ours (a timer aborting the request);
 * every failure is a `TokenizeError` whose code the caller can count.
 */

import {
  type ChatRequestLike,
  type PromptTokenizer,
  TokenizeError,
  type TokenizeResult,
} from "./types.js";

export interface RemoteTokenizerOptions {
  /** Worker base URL, e.g. `http://10.0.0.5:8000`. */
  readonly baseUrl: string;
  readonly model: string;
  /** Whole-request timeout in ms. */
  readonly timeoutMs?: number;
  /** `Authorization` header value for the worker (vLLM's `--api-key`), if any. */
  readonly authorization?: string | null;
}

export const DEFAULT_REMOTE_TOKENIZER_OPTIONS = Object.freeze({ timeoutMs: 2_000 });

export class RemoteTokenizer implements PromptTokenizer {
  readonly model: string;
  readonly #url: string;
  readonly #timeoutMs: number;
  readonly #headers: Record<string, string>;
  readonly #inFlight = new Set<AbortController>();
  #closed = false;

  constructor(options: RemoteTokenizerOptions) {
    this.model = options.model;
    this.#url = `${options.baseUrl.replace(/\/+$/, "")}/tokenize`;
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_REMOTE_TOKENIZER_OPTIONS.timeoutMs;
    this.#headers = { "content-type": "application/json" };
    if (options.authorization != null) this.#headers.authorization = options.authorization;
  }

  tokenizeCompletion(prompt: string, addSpecialTokens = true): Promise<TokenizeResult> {
    const body: Record<string, unknown> =
      this.model === "" ? { prompt } : { model: this.model, prompt };
    // vLLM's /tokenize takes the field too (TokenizeCompletionRequest, default true).
    if (!addSpecialTokens) body.add_special_tokens = false;
    return this.#post(body);
  }

  tokenizeChat(request: ChatRequestLike): Promise<TokenizeResult> {
    const body: Record<string, unknown> = {
      ...(this.model === "" ? {} : { model: this.model }),
      messages: request.messages,
      add_generation_prompt: request.add_generation_prompt ?? true,
      continue_final_message: request.continue_final_message ?? false,
    };
    if (request.tools !== undefined) body.tools = request.tools;
    let kwargs = request.chat_template_kwargs;
    const effort = request.reasoning_effort;
    if (typeof effort === "string") {
      // vLLM's /tokenize has no reasoning_effort: what chat completions derive from it
      // (build_chat_params) goes in as template kwargs, filtered there to the template's.
      kwargs = {
        ...kwargs,
        reasoning_effort: effort,
        ...(kwargs !== undefined && "enable_thinking" in kwargs
          ? {}
          : { enable_thinking: effort !== "none" }),
      };
    }
    if (kwargs !== undefined) body.chat_template_kwargs = kwargs;
    if (request.documents !== undefined) body.documents = request.documents;
    // Both are fields of vLLM's TokenizeChatRequest; the worker applies its own
    // --trust-request-chat-template rule to a chat_template.
    if (request.add_special_tokens !== undefined) {
      body.add_special_tokens = request.add_special_tokens;
    }
    if (request.chat_template !== undefined) body.chat_template = request.chat_template;
    return this.#post(body);
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const c of this.#inFlight) c.abort();
  }

  async #post(body: unknown): Promise<TokenizeResult> {
    if (this.#closed)
      throw new TokenizeError("closed", `remote tokenizer for ${this.model} is closed`);
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, this.#timeoutMs);
    this.#inFlight.add(controller);
    try {
      let res: Response;
      try {
        res = await fetch(this.#url, {
          method: "POST",
          headers: this.#headers,
          body: JSON.stringify(body),
          signal: controller.signal,
        });
      } catch (err) {
        throw this.#failure(err, timedOut, "request");
      }
      let text: string;
      try {
        text = await res.text();
      } catch (err) {
        throw this.#failure(err, timedOut, "response body");
      }
      if (!res.ok) {
        throw new TokenizeError(
          "http_status",
          `${this.#url} answered ${res.status}: ${text.slice(0, 300)}`,
        );
      }
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch (err) {
        throw new TokenizeError("bad_response", `${this.#url} answered non-JSON`, { cause: err });
      }
      const tokens = (parsed as { tokens?: unknown } | null)?.tokens;
      if (!Array.isArray(tokens) || !tokens.every((t) => Number.isInteger(t) && t >= 0)) {
        throw new TokenizeError(
          "bad_response",
          `${this.#url} answered without an integer 'tokens' list`,
        );
      }
      return { tokenIds: tokens as number[] };
    } finally {
      clearTimeout(timer);
      this.#inFlight.delete(controller);
    }
  }

  #failure(err: unknown, timedOut: boolean, what: string): TokenizeError {
    if (timedOut) {
      return new TokenizeError("timeout", `${this.#url}: no ${what} within ${this.#timeoutMs} ms`, {
        cause: err,
      });
    }
    if (this.#closed)
      return new TokenizeError("closed", `remote tokenizer for ${this.model} is closed`);
    return new TokenizeError("unreachable", `${this.#url}: ${(err as Error).message}`, {
      cause: err,
    });
  }
}
