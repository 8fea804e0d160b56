/**
 * Splits text at added tokens the way HF tokenizers do before the model runs: leftmost-longest
 * match of the non-normalized added tokens, with `lstrip`/`rstrip` eating the whitespace
 * beside a token. Text between two added tokens is then encoded on its own, which is what
 * makes a per-segment cache possible (checked per tokenizer by `segment-probe.ts`).
 */

import type { AddedTokenSpec } from "./model-files.js";

export type Piece =
  | { readonly kind: "token"; readonly id: number }
  | { readonly kind: "text"; readonly text: string };

export type Splitter = (text: string) => Piece[];

function escapeRe(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\/-]/g, "\\$&");
}

/**
 * A splitter on the added tokens that are matched on raw text (`normalized: false`, not
 * `single_word`); the others stay inside segments, where the tokenizer handles them.
 */
export function buildSplitter(tokens: readonly AddedTokenSpec[]): Splitter {
  const usable = tokens.filter((t) => !t.normalized && !t.singleWord && t.content.length > 0);
  if (usable.length === 0) return (text) => (text === "" ? [] : [{ kind: "text", text }]);
  const byContent = new Map(usable.map((t) => [t.content, t]));
  // Longest first: at one position the alternation then takes the longest token.
  const alternatives = [...byContent.keys()].sort((a, b) => b.length - a.length).map(escapeRe);
  const re = new RegExp(alternatives.join("|"), "g");
  return (text) => {
    const raw: Array<string | AddedTokenSpec> = [];
    let last = 0;
    for (const m of text.matchAll(re)) {
      raw.push(text.slice(last, m.index));
      raw.push(byContent.get(m[0])!);
      last = m.index + m[0].length;
    }
    raw.push(text.slice(last));
    for (let i = 0; i < raw.length; i++) {
      const t = raw[i];
      if (t === undefined || typeof t === "string") continue;
      const before = raw[i - 1];
      const after = raw[i + 1];
      if (t.lstrip && typeof before === "string") raw[i - 1] = before.trimEnd();
      if (t.rstrip && typeof after === "string") raw[i + 1] = after.trimStart();
    }
    const out: Piece[] = [];
    for (const p of raw) {
      if (typeof p !== "string") out.push({ kind: "token", id: p.id });
      else if (p !== "") out.push({ kind: "text", text: p });
    }
    return out;
  };
}
