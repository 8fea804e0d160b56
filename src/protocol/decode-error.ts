/**
 * Decode errors and skip counters shared by the engine codecs (vLLM/SGLang, Mooncake).
 *
 * Decoding never throws: a payload either yields a batch (with counts of what was
 * deliberately skipped) or one typed error for the whole batch. The codes are a small
 * closed set so callers can label metrics with them; the message says what was wrong
 * and where (event index, field) for the log line.
 */

/** Why a whole batch was rejected. Stable: used as a metric label. */
export type DecodeErrorCode =
  /** Not one well-formed msgpack value: truncated, reserved byte, trailing bytes, too deep. */
  | "not_msgpack"
  /** The batch itself has the wrong shape: not an array/map, `ts`/`events`/rank wrong. */
  | "bad_envelope"
  /** An event has the wrong shape: not an array/map, no tag, a field of the wrong type. */
  | "bad_event"
  /** A block hash is not an int, a binary digest or a non-empty string. */
  | "bad_hash"
  /** `token_ids` is not a list of integers in [0, 2^32). */
  | "bad_tokens";

export const DECODE_ERROR_CODES: readonly DecodeErrorCode[] = [
  "not_msgpack",
  "bad_envelope",
  "bad_event",
  "bad_hash",
  "bad_tokens",
];

export interface DecodeError {
  readonly code: DecodeErrorCode;
  /** Human-readable, names the event index and field when there is one. */
  readonly message: string;
  /** Index of the offending event in the batch, when the error is inside an event. */
  readonly eventIndex: number | null;
  /** Wire name of the offending field (e.g. `block_hashes`), when known. */
  readonly field: string | null;
}

/** What a successful decode left out on purpose. None of these are errors. */
export interface SkipCounts {
  /** Events whose tag this decoder does not know (future engines), skipped. */
  unknownTag: number;
  /** Events of a KV cache group other than the main full-attention group, dropped. */
  nonMainGroup: number;
  /** Map keys (or trailing array fields) this decoder does not know, ignored. */
  unknownKeys: number;
}

/** A fresh all-zero skip counter. */
export function emptySkipCounts(): SkipCounts {
  return { unknownTag: 0, nonMainGroup: 0, unknownKeys: 0 };
}

/** Build a decode error; the location is appended to the message when present. */
export function decodeError(
  code: DecodeErrorCode,
  what: string,
  eventIndex: number | null = null,
  field: string | null = null,
): DecodeError {
  let where = "";
  if (eventIndex !== null) where += ` (event ${eventIndex}${field !== null ? `, ${field}` : ""})`;
  else if (field !== null) where += ` (${field})`;
  return { code, message: `${what}${where}`, eventIndex, field };
}

/** Internal: thrown inside a codec and turned into a result at its boundary. */
export class DecodeFailure extends Error {
  readonly error: DecodeError;
  constructor(error: DecodeError) {
    super(error.message);
    this.error = error;
  }
}
