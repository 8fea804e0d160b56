/**
 * The prompt's token ids for routing: the client's own ids for a token-id prompt, else
 * the model's tokenizer (`tokenizerFor`: local model files, else a worker's `/tokenize`).
 * When the prompt is a batch or tokenization fails, the request is routed on load alone (no prefix match) and still
 * served; each such case is counted by reason.
 */

import { performance } from "node:perf_hooks";
import { LocalTokenizer, type PromptTokenizer, TokenizeError } from "../tokenize/index.js";
import type { LogSink } from "../util/log-sink.js";
import type { GatewayMetrics } from "./gateway-metrics.js";
import type { GatewayRequest } from "./request-body.js";

export interface PromptTokens {
  readonly ids: ArrayLike<number>;
  /** Whether ids are the real prompt (false: routing on load alone). */
  readonly real: boolean;
}

export async function tokenizePrompt(
  req: GatewayRequest,
  /** The model whose tokenizer applies: the request's, or a LoRA adapter's base model. */
  model: string | null,
  tokenizerFor: (model: string) => PromptTokenizer,
  metrics: GatewayMetrics,
  logger: LogSink,
  /** The request's JSON body (a chat's fields are read from it again on a tokenizer thread). */
  body?: Uint8Array,
): Promise<PromptTokens> {
  const none = (reason: string): PromptTokens => {
    metrics.tokenizeFailures.inc({ reason });
    return { ids: [], real: false };
  };
  const p = req.prompt;
  if (p?.kind === "tokens") {
    metrics.tokenize.observe({ mode: "tokens" }, 0);
    return { ids: p.tokens, real: true };
  }
  if (p?.kind === "batch") return none("batch_prompt");
  const tokenizer = tokenizerFor(model ?? "");
  const mode = tokenizer instanceof LocalTokenizer ? "local" : "remote";
  const t0 = performance.now();
  try {
    const r =
      req.chat !== null
        ? await tokenizer.tokenizeChat(req.chat, body)
        : await tokenizer.tokenizeCompletion(
            p?.kind === "text" ? p.text : "",
            req.addSpecialTokens !== false,
          );
    metrics.tokenize.observe({ mode }, (performance.now() - t0) / 1000);
    if (mode === "local" && r.onThread !== true) metrics.tokenizeOnEventLoop.inc();
    // A thread's typed ids as they came (the router reads any array-like).
    return { ids: r.ids ?? r.tokenIds, real: true };
  } catch (err) {
    logger.debug({ err: String(err), model, mode }, "tokenization failed");
    return none(err instanceof TokenizeError ? err.code : "error");
  }
}
