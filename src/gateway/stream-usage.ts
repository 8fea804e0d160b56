/**
 * Usage for the prediction check on streams whose client did not ask for it: the gateway
 * asks the worker for the final usage chunk (`stream_options.include_usage`, spliced into
 * the client's bytes, nothing else changed) and removes that chunk from what the client
 * receives, so the client sees exactly the stream it asked for.
 */

import { StringDecoder } from "node:string_decoder";

const INCLUDE_USAGE = Buffer.from('"stream_options":{"include_usage":true},');

/**
 * The body to forward: the client's bytes with `stream_options.include_usage: true` added,
 * or null when that cannot be done without rewriting them (the client set
 * `stream_options` itself, or the body does not start with `{`).
 */
export function withIncludeUsage(raw: Buffer, body: Record<string, unknown>): Buffer | null {
  if (body.stream_options !== undefined) return null;
  let i = 0;
  while (
    i < raw.length &&
    (raw[i] === 0x20 || raw[i] === 0x0a || raw[i] === 0x0d || raw[i] === 0x09)
  )
    i++;
  if (raw[i] !== 0x7b) return null;
  const rest = raw.subarray(i + 1);
  // `{}` has no member to put a comma before.
  let j = 0;
  while (
    j < rest.length &&
    (rest[j] === 0x20 || rest[j] === 0x0a || rest[j] === 0x0d || rest[j] === 0x09)
  )
    j++;
  if (rest[j] === 0x7d) return null;
  return Buffer.concat([raw.subarray(0, i + 1), INCLUDE_USAGE, rest]);
}

/** Whether one SSE event is the usage-only chunk (`choices: []` and a usage object). */
function isUsageOnly(event: string): boolean {
  if (event.indexOf('"usage"') < 0) return false;
  const line = event.trimStart();
  if (!line.startsWith("data:")) return false;
  try {
    const o = JSON.parse(line.slice(5)) as { choices?: unknown; usage?: unknown };
    return (
      Array.isArray(o.choices) &&
      o.choices.length === 0 &&
      typeof o.usage === "object" &&
      o.usage !== null
    );
  } catch {
    return false;
  }
}

/**
 * Drops usage-only events from a server-sent-event stream, passing every other byte as it
 * came. Complete events are released as soon as their blank line arrives; a partial event
 * waits for the rest (events are small: one token's chunk).
 */
export class UsageChunkFilter {
  #pending = "";
  // A character split across chunks is completed before it is re-encoded.
  readonly #decoder = new StringDecoder("utf8");

  push(chunk: Buffer): Buffer {
    const text = this.#pending + this.#decoder.write(chunk);
    let out = "";
    let start = 0;
    for (let end = text.indexOf("\n\n", start); end >= 0; end = text.indexOf("\n\n", start)) {
      const event = text.slice(start, end + 2);
      if (!isUsageOnly(event)) out += event;
      start = end + 2;
    }
    this.#pending = text.slice(start);
    return Buffer.from(out, "utf8");
  }

  /** What is left at the end of the stream (an unterminated event passes as it is). */
  flush(): Buffer {
    const rest = this.#pending + this.#decoder.end();
    this.#pending = "";
    return Buffer.from(isUsageOnly(rest) ? "" : rest, "utf8");
  }
}
