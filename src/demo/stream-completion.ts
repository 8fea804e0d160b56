/**
 * The demo's client side of one request: a streaming `POST /v1/chat/completions` with the
 * conversation's messages as text, read as server-sent events — what any OpenAI client
 * sends. It notes when the first token arrives (the client-side time to first token),
 * collects the reply's text (the next turn sends it back as the assistant message), and
 * returns the worker's usage, including how many prompt tokens its prefix cache served.
 */

export interface CompletionUsage {
  readonly promptTokens: number;
  readonly completionTokens: number;
  readonly cachedTokens: number;
}

export interface ChatMessage {
  readonly role: "system" | "user" | "assistant";
  readonly content: string;
}

export interface StreamedCompletion {
  /** The response headers (through the gateway: `x-kvrouter-worker`, …). */
  readonly headers: Headers;
  /** `performance.now()` when the first token arrived. */
  readonly firstTokenAt: number;
  /** The reply's text, as streamed. */
  readonly replyText: string;
  readonly usage: CompletionUsage;
}

interface Chunk {
  readonly choices?: readonly { delta?: { content?: string | null } }[];
  readonly usage?: {
    prompt_tokens?: number;
    completion_tokens?: number;
    prompt_tokens_details?: { cached_tokens?: number } | null;
  };
  readonly error?: { message?: string };
}

/**
 * Stream one chat completion from `url` (a worker, or kvrouter's gateway). `onFirstToken`
 * runs as soon as the first token is read. Throws on an HTTP error, a malformed stream, or
 * a stream that ends without usage.
 */
export async function streamCompletion(
  url: string,
  messages: readonly ChatMessage[],
  maxTokens: number,
  onFirstToken: () => void,
  signal: AbortSignal,
): Promise<StreamedCompletion> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: "sim-model",
      messages,
      max_tokens: maxTokens,
      stream: true,
      stream_options: { include_usage: true },
    }),
    signal,
  });
  if (!res.ok || res.body === null) {
    throw new Error(`${url}/v1/chat/completions: HTTP ${res.status} ${await res.text()}`);
  }
  const decoder = new TextDecoder();
  let reply = "";
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
    const text = chunk.choices?.[0]?.delta?.content ?? "";
    if (text !== "") {
      if (firstTokenAt === null) {
        firstTokenAt = performance.now();
        onFirstToken();
      }
      reply += text;
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
    throw new Error(`${url}: the stream ended without tokens, usage or [DONE]`);
  }
  return { headers: res.headers, firstTokenAt, replyText: reply, usage };
}
