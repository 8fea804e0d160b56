/**
 * Reading the engine's `usage.prompt_tokens_details.cached_tokens` out of an answer the
 * gateway relays unchanged: for a JSON answer, from the whole body (bounded); for a
 * server-sent-event stream, from the `data:` lines that carry a usage object (vLLM sends
 * it in the final chunk when `stream_options.include_usage` is set). Bytes without
 * `"usage"` are never decoded or parsed, so scanning a chunk costs a byte search.
 */

const NEWLINE = 0x0a;
const USAGE_KEY = Buffer.from('"usage"');

/** Largest JSON answer kept to read its usage (bigger answers are relayed, not checked). */
const MAX_JSON_BYTES = 4 * 1024 * 1024;

export interface UsageFound {
  readonly promptTokens: number | null;
  readonly cachedTokens: number | null;
}

function fromObject(o: unknown): UsageFound | null {
  const usage = (o as { usage?: unknown } | null)?.usage;
  if (typeof usage !== "object" || usage === null) return null;
  const u = usage as { prompt_tokens?: unknown; prompt_tokens_details?: unknown };
  const details = u.prompt_tokens_details as { cached_tokens?: unknown } | null | undefined;
  const cached = details?.cached_tokens;
  return {
    promptTokens: typeof u.prompt_tokens === "number" ? u.prompt_tokens : null,
    cachedTokens: typeof cached === "number" ? cached : null,
  };
}

export class UsageScanner {
  readonly #sse: boolean;
  #parts: Buffer[] = [];
  #bytes = 0;
  /** The stream's bytes after its last newline (a line still arriving). */
  #tail: Buffer = Buffer.alloc(0);
  #found: UsageFound | null = null;

  constructor(contentType: string | undefined) {
    this.#sse = (contentType ?? "").includes("text/event-stream");
  }

  push(chunk: Buffer): void {
    if (!this.#sse) {
      this.#bytes += chunk.length;
      if (this.#bytes <= MAX_JSON_BYTES) this.#parts.push(chunk);
      else this.#parts = [];
      return;
    }
    const data = this.#tail.length === 0 ? chunk : Buffer.concat([this.#tail, chunk]);
    const last = data.lastIndexOf(NEWLINE);
    if (last < 0) {
      this.#tail = data.length > MAX_JSON_BYTES ? Buffer.alloc(0) : Buffer.from(data);
      return;
    }
    // Complete lines: decoded only when one of them mentions usage (once per stream).
    if (data.indexOf(USAGE_KEY) >= 0 && data.indexOf(USAGE_KEY) < last) {
      const text = data.toString("utf8", 0, last);
      for (const line of text.split("\n")) this.#line(line);
    }
    this.#tail = last + 1 === data.length ? Buffer.alloc(0) : Buffer.from(data.subarray(last + 1));
  }

  #line(line: string): void {
    if (!line.startsWith("data:") || line.indexOf('"usage"') < 0) return;
    try {
      const found = fromObject(JSON.parse(line.slice(5)));
      if (found !== null) this.#found = found;
    } catch {
      // not JSON: not ours to judge, the client gets it as it is
    }
  }

  /** The usage reported, once the answer has ended (null when none). */
  result(): UsageFound | null {
    if (this.#sse) {
      if (this.#tail.length > 0) this.#line(this.#tail.toString("utf8"));
      return this.#found;
    }
    if (this.#bytes === 0 || this.#bytes > MAX_JSON_BYTES) return null;
    try {
      return fromObject(JSON.parse(Buffer.concat(this.#parts).toString("utf8")));
    } catch {
      return null;
    }
  }
}
