/**
 * Load-time check that encoding text segment by segment (split at added tokens) gives the
 * same ids as encoding the whole text, for this tokenizer. It fails for tokenizers whose
 * normalizer or pre-tokenizer looks across added-token boundaries (e.g. Metaspace with
 * `prepend_scheme: "first"`, which treats the first segment differently); such tokenizers
 * are then encoded whole.
 */

import type { AddedTokenSpec } from "./model-files.js";
import type { Splitter } from "./segmenter.js";

export interface ProbeOutcome {
  readonly holds: boolean;
  readonly probes: number;
  /** The first probe whose ids differ, when one does. */
  readonly counterexample: string | null;
}

const FRAGMENTS = [
  "",
  "a",
  "Hello",
  " world",
  "  two  spaces  ",
  "\n",
  "\n\n",
  "\t",
  " ",
  "e\u0301",
  "\u0301x",
  "ﬁne Ａ",
  "日本語",
  "🙂",
  "123 4567",
  "'s",
  "user\n",
];

function probeStrings(tokens: readonly AddedTokenSpec[]): string[] {
  const marks = tokens
    .filter((t) => !t.normalized)
    .slice(0, 4)
    .map((t) => t.content);
  // lstrip/rstrip tokens are the risky ones: always include them.
  for (const t of tokens)
    if ((t.lstrip || t.rstrip) && !marks.includes(t.content)) marks.push(t.content);
  const out: string[] = [];
  for (const m of marks) {
    for (const a of FRAGMENTS) {
      for (const b of FRAGMENTS) out.push(`${a}${m}${b}`);
    }
  }
  if (marks.length > 0) {
    const [m0, m1 = m0] = marks;
    out.push(`${m0}system\nYou are helpful.${m1}\n${m0}user\n  Hi 🙂 ${m1}\n${m0}assistant\n`);
    out.push(`${m0}${m1}${m0} x${m1} `);
  }
  return out;
}

export function probeSegmentParity(
  tokens: readonly AddedTokenSpec[],
  split: Splitter,
  encode: (text: string) => number[],
): ProbeOutcome {
  const probes = probeStrings(tokens);
  for (const p of probes) {
    const whole = encode(p);
    const parts: number[] = [];
    for (const piece of split(p)) {
      if (piece.kind === "token") parts.push(piece.id);
      else parts.push(...encode(piece.text));
    }
    if (whole.length !== parts.length || whole.some((id, i) => id !== parts[i])) {
      return { holds: false, probes: probes.length, counterexample: p };
    }
  }
  return { holds: true, probes: probes.length, counterexample: null };
}
