/**
 * FALLBACK tokenizer, to be replaced at merge by `src/tokenize/`'s `RemoteTokenizer`: a
 * `PromptTokenizer` that asks a healthy worker serving the model for the token ids (vLLM's
 * `POST /tokenize`: `{model, prompt}` or `{model, messages, add_generation_prompt, …}`),
 * with a timeout. The engine tokenizes with its own tokenizer and chat template, so the
 * ids are exactly the engine's; the price is one extra round trip per request.
 */

import { type Agent, request } from "undici";
import type { ChatRequestLike, PromptTokenizer, TokenizeResult } from "../tokenize/types.js";

export interface WorkerTokenizeOptions {
  readonly model: string;
  /** Base URL of a healthy worker serving the model, or null when none is. */
  readonly pickWorker: () => string | null;
  readonly timeoutMs: number;
  readonly agent: Agent;
  /** `Authorization` header value for the worker, if any. */
  readonly authorization: string | null;
}

export class WorkerTokenizeFallback implements PromptTokenizer {
  readonly model: string;
  readonly #o: WorkerTokenizeOptions;

  constructor(o: WorkerTokenizeOptions) {
    this.model = o.model;
    this.#o = o;
  }

  tokenizeCompletion(prompt: string): Promise<TokenizeResult> {
    return this.#call({ prompt });
  }

  tokenizeChat(r: ChatRequestLike): Promise<TokenizeResult> {
    return this.#call({ ...r, add_generation_prompt: r.add_generation_prompt ?? true });
  }

  async #call(fields: Record<string, unknown>): Promise<TokenizeResult> {
    const url = this.#o.pickWorker();
    if (url === null) throw new Error(`no healthy worker serves ${this.model} to tokenize`);
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (this.#o.authorization !== null) headers.authorization = this.#o.authorization;
    const body = JSON.stringify(this.model === "" ? fields : { model: this.model, ...fields });
    const res = await request(`${url.replace(/\/$/, "")}/tokenize`, {
      dispatcher: this.#o.agent,
      method: "POST",
      headers,
      body,
      signal: AbortSignal.timeout(this.#o.timeoutMs),
    });
    const text = await res.body.text();
    if (res.statusCode !== 200) {
      throw new Error(`${url}/tokenize: HTTP ${res.statusCode} ${text.slice(0, 200)}`);
    }
    const tokens = (JSON.parse(text) as { tokens?: unknown }).tokens;
    if (!Array.isArray(tokens) || !tokens.every((t) => Number.isInteger(t))) {
      throw new Error(`${url}/tokenize: no integer 'tokens' array in the answer`);
    }
    return { tokenIds: tokens as number[] };
  }

  async close(): Promise<void> {}
}
