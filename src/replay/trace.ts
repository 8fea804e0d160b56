/**
 * Request traces in the Mooncake format (one JSON object per line:
 * `timestamp` ms, `input_length`, `output_length`, `hash_ids` — one id per 512-token
 * block, the last block partial). The replay tool only needs these four fields; a bad
 * line is an error naming the line, because a silently shortened trace would give
 * plausible but wrong figures.
 */

import { readFileSync } from "node:fs";

/** Tokens per trace block in the Mooncake traces. */
export const TRACE_BLOCK_TOKENS = 512;

/** One request of a trace. */
export interface TraceRequest {
  /** Position in the (time-sorted) trace, 0-based; the request's id in the replay. */
  readonly index: number;
  /** Arrival time, ms from the start of the trace. */
  readonly arrivalMs: number;
  readonly inputLength: number;
  readonly outputLength: number;
  /** One id per trace block; equal ids at equal positions mean an equal prefix. */
  readonly hashIds: readonly number[];
}

/** A trace line that cannot be used; the message names the line and the field. */
export class TraceFormatError extends Error {
  constructor(
    readonly line: number,
    message: string,
  ) {
    super(`trace line ${line}: ${message}`);
    this.name = "TraceFormatError";
  }
}

function nonNegativeInt(obj: Record<string, unknown>, key: string, line: number): number {
  const v = obj[key];
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) {
    throw new TraceFormatError(
      line,
      `'${key}' must be a non-negative integer, got ${JSON.stringify(v)}`,
    );
  }
  return v;
}

/**
 * Parse one trace line (1-based `line` for messages). `blockTokens` is the trace's
 * block size, used to check `hash_ids.length === ceil(input_length / blockTokens)`.
 */
export function parseTraceLine(
  text: string,
  line: number,
  blockTokens = TRACE_BLOCK_TOKENS,
): Omit<TraceRequest, "index"> {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new TraceFormatError(line, `not JSON (${(err as Error).message})`);
  }
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    throw new TraceFormatError(line, "expected a JSON object");
  }
  const obj = raw as Record<string, unknown>;
  const ts = obj.timestamp;
  if (typeof ts !== "number" || !Number.isFinite(ts) || ts < 0) {
    throw new TraceFormatError(
      line,
      `'timestamp' must be a non-negative number, got ${JSON.stringify(ts)}`,
    );
  }
  const inputLength = nonNegativeInt(obj, "input_length", line);
  const outputLength = nonNegativeInt(obj, "output_length", line);
  if (inputLength === 0) throw new TraceFormatError(line, "'input_length' must be at least 1");
  const ids = obj.hash_ids;
  if (!Array.isArray(ids)) throw new TraceFormatError(line, "'hash_ids' must be an array");
  for (const id of ids) {
    if (typeof id !== "number" || !Number.isSafeInteger(id) || id < 0) {
      throw new TraceFormatError(
        line,
        `'hash_ids' holds ${JSON.stringify(id)}, not a non-negative integer`,
      );
    }
  }
  const expected = Math.ceil(inputLength / blockTokens);
  if (ids.length !== expected) {
    throw new TraceFormatError(
      line,
      `'hash_ids' has ${ids.length} ids but input_length ${inputLength} needs ${expected} blocks of ${blockTokens}`,
    );
  }
  return { arrivalMs: ts, inputLength, outputLength, hashIds: ids as number[] };
}

/** Parse a whole trace text; blank lines are skipped; requests are sorted by arrival (stable). */
export function parseTrace(
  text: string,
  options: { limit?: number; blockTokens?: number } = {},
): TraceRequest[] {
  const limit = options.limit ?? Number.POSITIVE_INFINITY;
  const parsed: Omit<TraceRequest, "index">[] = [];
  const lines = text.split("\n");
  for (let i = 0; i < lines.length && parsed.length < limit; i++) {
    const t = lines[i]!.trim();
    if (t === "") continue;
    parsed.push(parseTraceLine(t, i + 1, options.blockTokens));
  }
  // Stable sort: Array.prototype.sort is stable, so equal timestamps keep file order.
  parsed.sort((a, b) => a.arrivalMs - b.arrivalMs);
  return parsed.map((r, index) => ({ index, ...r }));
}

/** Read and parse a trace file (`limit`: keep only the first N requests of the file). */
export function loadTrace(
  path: string,
  options: { limit?: number; blockTokens?: number } = {},
): TraceRequest[] {
  return parseTrace(readFileSync(path, "utf8"), options);
}
