/**
 * A deterministic stand-in tokenizer for the simulated worker. Text is split into pieces
 * (a word or number with its leading spaces, or one punctuation mark; long words in chunks
 * of 8 characters), and each piece is hashed into a 128k vocabulary. Equal texts give equal
 * ids, and texts sharing a prefix share the ids of the pieces before the point where they
 * differ — which is what prefix caching needs. Chat messages go through a fixed template
 * with special tokens first.
 *
 * Decoding uses the pieces seen so far plus the generator's word list; ids never seen
 * decode to a placeholder.
 */

/** Ids below this are reserved for special tokens. */
const SPECIAL_BASE = 128_000;
/** Vocabulary size (Llama-3-like). */
export const VOCAB_SIZE = 128_256;

export const SPECIAL_TOKENS: Readonly<Record<string, number>> = Object.freeze({
  "<|begin_of_text|>": SPECIAL_BASE,
  "<|start_header_id|>": SPECIAL_BASE + 6,
  "<|end_header_id|>": SPECIAL_BASE + 7,
  "<|eot_id|>": SPECIAL_BASE + 9,
});

const PIECE_RE = /\s*[\p{L}\p{N}_]+|\s*[^\s\p{L}\p{N}_]|\s+/gu;
const SPECIAL_RE = /(<\|[a-z_]+\|>)/;
const MAX_PIECE = 8;
/** Bound on the decode table so a long-running worker does not grow without end. */
const MAX_REMEMBERED = 200_000;

/** A chat message as accepted by the simulator (string content or text parts). */
export interface ChatMessage {
  readonly role: string;
  readonly content: string;
}

function pieceId(piece: string): number {
  // FNV-1a over UTF-16 units, then a finaliser; stable across runs and processes.
  let h = 0x811c9dc5;
  for (let i = 0; i < piece.length; i++) {
    h ^= piece.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 15;
  h = Math.imul(h, 0x2c1b3c6d);
  h ^= h >>> 12;
  return (h >>> 0) % SPECIAL_BASE;
}

export class SimTokenizer {
  readonly #pieces = new Map<number, string>();

  constructor() {
    for (const [text, id] of Object.entries(SPECIAL_TOKENS)) this.#pieces.set(id, text);
  }

  /** Token ids of `text`; special-token markers in the text become their ids. */
  encode(text: string): number[] {
    const out: number[] = [];
    for (const part of text.split(SPECIAL_RE)) {
      if (part === "") continue;
      const special = SPECIAL_TOKENS[part];
      if (special !== undefined) {
        out.push(special);
        continue;
      }
      for (const m of part.matchAll(PIECE_RE)) {
        const piece = m[0];
        for (let i = 0; i < piece.length; i += MAX_PIECE) {
          out.push(this.#id(piece.slice(i, i + MAX_PIECE)));
        }
      }
    }
    return out;
  }

  /** The text of one token id (pieces seen by `encode`/`idOf`, or a placeholder). */
  decodeToken(id: number): string {
    return this.#pieces.get(id) ?? ` <${id}>`;
  }

  decode(ids: readonly number[]): string {
    let s = "";
    for (const id of ids) s += this.decodeToken(id);
    return s;
  }

  /** The id of one piece (used by the text generator to know its words' ids). */
  idOf(piece: string): number {
    return this.#id(piece);
  }

  /** The prompt a chat request becomes: a fixed Llama-3-style template. */
  renderChat(messages: readonly ChatMessage[], addGenerationPrompt = true): string {
    let s = "<|begin_of_text|>";
    for (const m of messages) {
      s += `<|start_header_id|>${m.role}<|end_header_id|>\n\n${m.content}<|eot_id|>`;
    }
    if (addGenerationPrompt) s += "<|start_header_id|>assistant<|end_header_id|>\n\n";
    return s;
  }

  #id(piece: string): number {
    const id = pieceId(piece);
    if (this.#pieces.size < MAX_REMEMBERED && !this.#pieces.has(id)) this.#pieces.set(id, piece);
    return id;
  }
}
