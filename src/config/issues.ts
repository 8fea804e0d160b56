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
