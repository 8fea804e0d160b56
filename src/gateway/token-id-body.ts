/**
 * A completion body whose `prompt` is a flat array of token ids, parsed without building
 * that array on V8's heap: the ids are read from the body's bytes straight into an
 * `Int32Array` (past 16 ids its store lives outside V8's heap, so no scavenge copies it;
 * smaller typed arrays are kept on the heap, which for so few ids costs little),
 * and only the rest of the body — the few other fields, with the array cut out — goes
 * through `JSON.parse`. For an 8k-token prompt that saves the 51 KB string `JSON.parse`
 * needs, the 8k-element array it builds and most of the parse's time, on the path every
 * token-id request waits on.
 *
 * Only the plainest shape is taken: a top-level object whose one `prompt` member (its
 * key written without escapes) is a non-empty array of JSON integers written as digits
 * (no sign, fraction, exponent or leading zero) below 2^31, and no other key written with
 * escapes. Anything else — another prompt form, a number the plain digits do not cover,
 * malformed JSON — returns null, and the caller parses the whole body as before, so every
 * answer (the value, or the error) is the whole-body parse's.
 */

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const ZERO = 0x30;
const ID_LIMIT = 2 ** 31;
/** `prompt` as bytes. */
const PROMPT = [0x70, 0x72, 0x6f, 0x6d, 0x70, 0x74];

const isSpace = (c: number | undefined) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

/** Ids of the body being read; grown as needed, copied out exactly. */
const SCRATCH_IDS = 16_384;
/** Past this many ids (1 MB) the grown array is dropped after the body: one huge prompt
 * does not keep its size for the life of the process. */
const SCRATCH_KEEP = 1 << 18;
let scratch = new Int32Array(SCRATCH_IDS);

/** How many ids the scratch array holds between bodies (for tests). */
export function scratchCapacity(): number {
  return scratch.length;
}

/** Index of the quote closing the string opening at `at`, or -1; `escaped` says if it had `\`. */
function stringEnd(buf: Uint8Array, at: number): { end: number; escaped: boolean } {
  let escaped = false;
  for (let p = at + 1; p < buf.length; p++) {
    const c = buf[p];
    if (c === BACKSLASH) {
      escaped = true;
      p++;
    } else if (c === QUOTE) return { end: p, escaped };
  }
  return { end: -1, escaped };
}

function isPromptKey(buf: Uint8Array, at: number, end: number): boolean {
  if (end - at - 1 !== PROMPT.length) return false;
  for (let k = 0; k < PROMPT.length; k++) if (buf[at + 1 + k] !== PROMPT[k]) return false;
  return true;
}

/** `scratch` twice as long, its ids kept. */
function grow() {
  const grown = new Int32Array(scratch.length * 2);
  grown.set(scratch);
  scratch = grown;
  return grown;
}

/**
 * The ids of the array opening at `at` into `scratch`: their count and the closing
 * bracket's index, or null. One pass over the bytes, each id read whole in an inner loop
 * (spaces, then digits, then spaces, then `,` or `]`): ~80 µs for 8k ids where a
 * per-byte state machine took ~140. A byte past the end reads `undefined`, which is
 * neither a space nor a digit, so every loop stops there and the answer is null.
 */
function readIds(buf: Uint8Array, at: number): { count: number; end: number } | null {
  let out = scratch;
  let count = 0;
  let p = at + 1;
  for (;;) {
    let c = buf[p];
    while (isSpace(c)) c = buf[++p];
    // `undefined - ZERO` is NaN: not a digit.
    let d = (c as number) - ZERO;
    if (!(d >= 0 && d <= 9)) return null; // `[]`, `[1,]`, a sign, a string…
    let v = d;
    c = buf[++p];
    d = (c as number) - ZERO;
    if (d >= 0 && d <= 9) {
      // JSON has no leading zeros ("01" is a syntax error, left to the whole-body parse).
      if (v === 0) return null;
      do {
        v = v * 10 + d;
        if (v >= ID_LIMIT) return null;
        c = buf[++p];
        d = (c as number) - ZERO;
      } while (d >= 0 && d <= 9);
    }
    if (count === out.length) out = grow();
    out[count++] = v;
    while (isSpace(c)) c = buf[++p];
    if (c === COMMA) p++;
    else if (c === CLOSE_BRACKET) return { count, end: p };
    else return null; // `1.5`, `1e3`, `1 2`, the end of the body…
  }
}

/**
 * The body as `JSON.parse` would give it, with `prompt` an `Int32Array` of the ids; null
 * when the body is not of the plain shape above (parse it whole then).
 */
export function parseTokenIdBody(buf: Uint8Array): Record<string, unknown> | null {
  try {
    return parse(buf);
  } finally {
    if (scratch.length > SCRATCH_KEEP) scratch = new Int32Array(SCRATCH_IDS);
  }
}

function parse(buf: Uint8Array): Record<string, unknown> | null {
  let p = 0;
  while (isSpace(buf[p])) p++;
  if (buf[p] !== OPEN_BRACE) return null;
  let depth = 1;
  let expectKey = true;
  let promptKey = false;
  let idsAt = -1;
  let ids: { count: number; end: number } | null = null;
  let close = -1;
  for (p++; p < buf.length; p++) {
    const c = buf[p]!;
    if (c === QUOTE) {
      const s = stringEnd(buf, p);
      if (s.end < 0) return null;
      if (depth === 1 && expectKey) {
        // A key with escapes might spell `prompt`: the whole-body parse decides.
        if (s.escaped) return null;
        promptKey = isPromptKey(buf, p, s.end);
        expectKey = false;
      }
      p = s.end;
    } else if (c === COLON && depth === 1 && promptKey) {
      promptKey = false;
      if (idsAt >= 0) return null; // a second `prompt`: the last one wins, left to JSON.parse
      let q = p + 1;
      while (isSpace(buf[q])) q++;
      if (buf[q] !== OPEN_BRACKET) return null;
      ids = readIds(buf, q);
      if (ids === null) return null;
      idsAt = q;
      p = ids.end;
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      depth++;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      depth--;
      if (depth === 0) {
        close = p;
        break;
      }
    } else if (c === COMMA && depth === 1) {
      expectKey = true;
    }
  }
  if (close < 0 || ids === null) return null;
  for (let q = close + 1; q < buf.length; q++) if (!isSpace(buf[q])) return null;
  const bytes = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  // '[' and ']' are ASCII, never inside a UTF-8 sequence: the two halves decode as in the whole.
  const rest = `${bytes.toString("utf8", 0, idsAt)}0${bytes.toString("utf8", ids.end + 1)}`;
  let parsed: unknown;
  try {
    parsed = JSON.parse(rest);
  } catch {
    return null;
  }
  const o = parsed as Record<string, unknown>;
  if (o.prompt !== 0) return null;
  o.prompt = scratch.slice(0, ids.count);
  return o;
}

/**
 * A gateway request's body from its bytes, for both ways a request is served (the
 * listener in `http/gateway-front.ts`, fastify's parser in `http/gateway-routes.ts`): a
 * completion's flat token-id prompt read by `parseTokenIdBody`, any other body by
 * `JSON.parse`, which throws on bad JSON.
 */
export function parseGatewayBody(buf: Buffer, completion: boolean): unknown {
  return (completion ? parseTokenIdBody(buf) : null) ?? JSON.parse(buf.toString("utf8"));
}
