/**
 * Configuration problems and how bad values are shown in them. Kept apart so the
 * section validator and the worker validator share one vocabulary.
 */

import { clip, preview } from "../util/truncate.js";

/** One problem: `key` is a dotted path (`server.port`, `workers[2].url`). */
export interface ConfigIssue {
  readonly key: string;
  readonly message: string;
}

/** Short, unambiguous rendering of a bad value for messages. */
export function show(value: unknown): string {
  if (value === undefined) return "nothing";
  if (typeof value === "string") return JSON.stringify(clip(value));
  if (typeof value === "bigint") return `${value}`;
  if (value === null || typeof value !== "object") {
    const json = JSON.stringify(value);
    return json === undefined ? String(value) : clip(json);
  }
  return preview(value);
}

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** All issues as one message, one per line, for start-up failures. */
export function formatIssues(issues: readonly ConfigIssue[]): string {
  return issues.map((i) => `  ${i.key}: ${i.message}`).join("\n");
}

/** Edit distance (insertions, deletions, substitutions, adjacent swaps) between two names. */
function distance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        best = Math.min(best, d[i - 2]![j - 2]! + 1);
      }
      d[i]![j] = best;
    }
  }
  return d[a.length]![b.length]!;
}

/**
 * The known name closest to a typo (case-insensitive), if it is close enough to be meant:
 * a few edits away (about one per three letters), or the start of a longer name.
 */
export function closest(name: string, known: Iterable<string>): string | null {
  const lower = name.toLowerCase();
  let best: string | null = null;
  let bestDistance = Math.max(1, Math.min(3, Math.floor(name.length / 3)));
  for (const k of known) {
    // A truncated name (`bodyLimit` for `bodyLimitBytes`) is meant as much as a typo.
    if (lower.length >= 4 && k.toLowerCase().startsWith(lower) && best === null) best = k;
    const dist = distance(lower, k.toLowerCase());
    if (dist <= bestDistance && (best === null || dist < bestDistance)) {
      best = k;
      bestDistance = dist;
    }
  }
  return best;
}

/** "unknown key", with "did you mean `port`?" when a known key is one typo away. */
export function unknownKey(name: string, known: Iterable<string>, what = "key"): string {
  const guess = closest(name, known);
  return guess === null ? `unknown ${what}` : `unknown ${what}; did you mean \`${guess}\`?`;
}
