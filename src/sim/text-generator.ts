/**
 * Deterministic "model output" for the simulator: the next token is a pure function of the
 * last few tokens and the position, drawn from a small word list so the text is readable.
 * The same prompt always yields the same completion on every worker, whatever its cache
 * state, so routing decisions never change answers.
 */

import type { SimTokenizer } from "./tokenizer.js";

const WORDS = (
  "the a of and to in is that it for on with as was by at from this be are or an which " +
  "cache block token prefix router worker engine request model prompt memory batch decode " +
  "prefill latency queue hit miss reuse event stream layer attention key value page " +
  "simulated fast slow large small first next last every each many few more less"
)
  .split(" ")
  .map((w) => ` ${w}`)
  .concat([".", ","]);

export class TextGenerator {
  readonly #ids: number[];

  constructor(tokenizer: Pick<SimTokenizer, "idOf">) {
    this.#ids = WORDS.map((w) => tokenizer.idOf(w));
  }

  /** The token that follows `tokens` (prompt + output so far). */
  next(tokens: readonly number[]): number {
    let h = Math.imul(tokens.length, 0x9e3779b1);
    for (let i = Math.max(0, tokens.length - 4); i < tokens.length; i++) {
      h = Math.imul(h ^ tokens[i]!, 0x01000193);
      h ^= h >>> 13;
    }
    h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
    h ^= h >>> 13;
    return this.#ids[(h >>> 0) % this.#ids.length]!;
  }
}
