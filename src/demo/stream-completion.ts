/**
 * The demo's client side of one request: a streaming `POST /v1/completions` with token ids
 * as the prompt, read as server-sent events. It notes when the first token arrives (the
 * client-side time to first token), rebuilds the reply's token ids from the streamed pieces
 * (one chunk per token) so the next turn extends exactly what the worker computed, and
 * returns the worker's usage, including how many prompt tokens its prefix cache served.
 */

import type { SimTokenizer } from "../sim/tokenizer.js";

export interface CompletionUsage {
  readonly promptTokens: number;
  readonly completionTokens: number;
  readonly cachedTokens: number;
}

export interface StreamedCompletion {
  /** The response headers (through the gateway: `x-kvrouter-worker`, …). */
  readonly headers: Headers;
  /** `performance.now()` when the first token arrived. */
  readonly firstTokenAt: number;
  readonly replyTokens: number[];
  readonly usage: CompletionUsage;
}

interface Chunk {
  readonly choices?: readonly { text?: string }[];
  readonly usage?: {
    prompt_tokens?: number;
    completion_tokens?: number;
    prompt_tokens_details?: { cached_tokens?: number } | null;
  };
  readonly error?: { message?: string };
}

/**
 * Stream one completion from `workerUrl` (a worker, or kvrouter's gateway). `onFirstToken` runs as soon as the first token is
 * read. Throws on an HTTP error, a malformed stream, or a stream that ends without usage.
 */
export async function streamCompletion(
  workerUrl: string,
  prompt: readonly number[],
  maxTokens: number,
  tokenizer: SimTokenizer,
  onFirstToken: () => void,
  signal: AbortSignal,
): Promise<StreamedCompletion> {
  const res = await fetch(`${workerUrl}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: "sim-model",
      prompt,
      max_tokens: maxTokens,
      stream: true,
      stream_options: { include_usage: true },
    }),
    signal,
  });
  if (!res.ok || res.body === null) {
    throw new Error(`${workerUrl}/v1/completions: HTTP ${res.status} ${await res.text()}`);
  }
  const decoder = new TextDecoder();
  const replyTokens: number[] = [];
  let firstTokenAt: number | null = null;
  let usage: CompletionUsage | null = null;
  let buffer = "";
  let done = false;
  const handle = (event: string) => {
    const data = event.startsWith("data: ") ? event.slice(6) : null;
    if (data === null) return;
    if (data === "[DONE]") {
      done = true;
      return;
    }
    const chunk = JSON.parse(data) as Chunk;
    if (chunk.error !== undefined) throw new Error(`stream error: ${chunk.error.message}`);
    const text = chunk.choices?.[0]?.text ?? "";
    if (text !== "") {
      if (firstTokenAt === null) {
        firstTokenAt = performance.now();
        onFirstToken();
      }
      replyTokens.push(tokenizer.idOf(text));
    }
    const u = chunk.usage;
    if (u !== undefined) {
      usage = {
        promptTokens: u.prompt_tokens ?? 0,
        completionTokens: u.completion_tokens ?? 0,
        cachedTokens: u.prompt_tokens_details?.cached_tokens ?? 0,
      };
    }
  };
  for await (const bytes of res.body as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(bytes, { stream: true });
    let end = buffer.indexOf("\n\n");
    while (end >= 0) {
      handle(buffer.slice(0, end));
      buffer = buffer.slice(end + 2);
      end = buffer.indexOf("\n\n");
    }
  }
  if (!done || usage === null || firstTokenAt === null) {
    throw new Error(`${workerUrl}: the stream ended without tokens, usage or [DONE]`);
  }
  const final: CompletionUsage = usage;
  if (final.completionTokens !== replyTokens.length) {
    throw new Error(
      `${workerUrl}: ${replyTokens.length} tokens streamed but usage says ${final.completionTokens}`,
    );
  }
  return { headers: res.headers, firstTokenAt, replyTokens, usage: final };
}
