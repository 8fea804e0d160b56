/**
 * Usage for the prediction check on streams whose client did not ask for it: the gateway
 * asks the worker for the final usage chunk (`stream_options.include_usage`, spliced into
 * the client's bytes, nothing else changed) and removes that chunk from what the client
 * receives, so the client sees exactly the stream it asked for.
 */

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

const EVENT_END = Buffer.from("\n\n");
/** The blank line that ends an event on a CRLF stream ends in this ("\r\n\r\n"). */
const EVENT_END_CRLF = Buffer.from("\n\r\n");
/** An unterminated event longer than this is passed on as it is (not held without bound). */
const MAX_PENDING = 1 << 20;
const USAGE_KEY = Buffer.from('"usage"');
const EMPTY = Buffer.alloc(0);

/**
 * Drops usage-only events from a server-sent-event stream, passing every other byte as it
 * came. Complete events are released as soon as their blank line arrives; a partial event
 * waits for the rest (events are small: one token's chunk). Bytes are never decoded unless
 * an event mentions `"usage"`: a chunk of whole events without it (the usual case: an
 * engine writes one event at a time) is passed on as the same buffer.
 */
export class UsageChunkFilter {
  #pending: Buffer = EMPTY;

  push(chunk: Buffer): Buffer {
    const data = this.#pending.length === 0 ? chunk : Buffer.concat([this.#pending, chunk]);
    const end = lastEventEnd(data);
    if (end < 0) {
      if (data.length > MAX_PENDING) {
        this.#pending = EMPTY;
        return data;
      }
      this.#pending = Buffer.from(data);
      return EMPTY;
    }
    // A split event (never a split character: the cut is at a newline) waits for its rest.
    this.#pending = end === data.length ? EMPTY : Buffer.from(data.subarray(end));
    const whole = end === data.length ? data : data.subarray(0, end);
    if (whole.indexOf(USAGE_KEY) < 0) return whole;
    const kept: Buffer[] = [];
    let start = 0;
    for (let e = nextEventEnd(whole, start); e >= 0; e = nextEventEnd(whole, start)) {
      const event = whole.subarray(start, e);
      if (event.indexOf(USAGE_KEY) < 0 || !isUsageOnly(event.toString("utf8"))) kept.push(event);
      start = e;
    }
    return kept.length === 1 ? kept[0]! : Buffer.concat(kept);
  }

  /** What is left at the end of the stream (an unterminated event passes as it is). */
  flush(): Buffer {
    const rest = this.#pending;
    this.#pending = EMPTY;
    if (rest.indexOf(USAGE_KEY) >= 0 && isUsageOnly(rest.toString("utf8"))) return EMPTY;
    return rest;
  }
}

/** Just past the last blank line of `data` (LF or CRLF), or −1. */
function lastEventEnd(data: Buffer): number {
  const lf = data.lastIndexOf(EVENT_END);
  const crlf = data.lastIndexOf(EVENT_END_CRLF);
  return Math.max(lf < 0 ? -1 : lf + 2, crlf < 0 ? -1 : crlf + 3);
}

/** Just past the first blank line of `data` from `from` (LF or CRLF), or −1. */
function nextEventEnd(data: Buffer, from: number): number {
  const lf = data.indexOf(EVENT_END, from);
  const crlf = data.indexOf(EVENT_END_CRLF, from);
  if (lf < 0) return crlf < 0 ? -1 : crlf + 3;
  if (crlf < 0) return lf + 2;
  return Math.min(lf + 2, crlf + 3);
}
