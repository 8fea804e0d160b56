/**
 * How deep a JSON body nests, checked on its bytes before it is parsed: a 4 MB body of
 * `[[[[…` costs a second of event loop to parse (`bench/hostile-body-bench.ts`), and no
 * route of ours accepts more than a few levels. The check first counts `[` and `{` with
 * the native `indexOf` and only scans (string-aware) when there are more openers than
 * the limit, so an ordinary body costs a few `indexOf` calls. On UTF-8 bytes: the quote,
 * the backslash and the brackets are ASCII, which no byte of a multi-byte character is.
 */

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACKET = 0x5b;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACKET = 0x5d;
const CLOSE_BRACE = 0x7d;

/** Whether the JSON text nests arrays/objects deeper than `max` (brackets in strings ignored). */
export function jsonDepthExceeds(bytes: Uint8Array, max: number): boolean {
  if (countOpeners(bytes, max + 1) <= max) return false;
  let depth = 0;
  const n = bytes.length;
  for (let i = 0; i < n; i++) {
    const c = bytes[i];
    if (c === QUOTE) {
      // A string's bytes are skipped with the native indexOf: its closing quote is the
      // first one not escaped (an odd run of backslashes before it).
      let end = bytes.indexOf(QUOTE, i + 1);
      while (end !== -1 && escaped(bytes, end)) end = bytes.indexOf(QUOTE, end + 1);
      if (end === -1) return false; // unterminated: the parse rejects it
      i = end;
    } else if (c === OPEN_BRACKET || c === OPEN_BRACE) {
      if (++depth > max) return true;
    } else if (c === CLOSE_BRACKET || c === CLOSE_BRACE) depth--;
  }
  return false;
}

/** Whether the quote at `at` is escaped: an odd number of backslashes right before it. */
function escaped(bytes: Uint8Array, at: number): boolean {
  let k = at - 1;
  while (k >= 0 && bytes[k] === BACKSLASH) k--;
  return (at - 1 - k) % 2 === 1;
}

/** Occurrences of `[` plus `{`, counting no further than `stop`. */
function countOpeners(bytes: Uint8Array, stop: number): number {
  let n = 0;
  for (const b of [OPEN_BRACKET, OPEN_BRACE]) {
    for (let i = bytes.indexOf(b); i !== -1 && n < stop; i = bytes.indexOf(b, i + 1)) n++;
  }
  return n;
}

/** The message of a body past `max` levels (one wording for every route). */
export function jsonTooDeepMessage(max: number): string {
  return `the body nests arrays/objects deeper than ${max} levels, more than this route accepts`;
}
