/**
 * A parser for the Prometheus text exposition format (0.0.4, and the OpenMetrics
 * subset engines emit): `# HELP` / `# TYPE` comments, label values with `\\`, `\"` and
 * `\n` escapes, `+Inf` / `-Inf` / `NaN`, optional timestamps. A bad line is reported
 * and skipped; it never loses the rest of the scrape.
 */

import { clip } from "../util/truncate.js";

/** One sample line. */
export interface PromSample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
  /** As written (ms in the Prometheus format, s in OpenMetrics); null when absent. */
  readonly timestamp: number | null;
}

export interface PromParseIssue {
  /** 1-based line number. */
  readonly line: number;
  readonly message: string;
}

export interface PromParseResult {
  /** Samples grouped by metric name, in input order. */
  readonly samples: ReadonlyMap<string, readonly PromSample[]>;
  /** `# TYPE` declarations: family name → type. */
  readonly types: ReadonlyMap<string, string>;
  readonly issues: readonly PromParseIssue[];
}

export interface PromParseOptions {
  /** Keep only samples with these names (skips parsing the rest); default all. */
  readonly names?: ReadonlySet<string>;
}

class LineError extends Error {}

const NAME_START = /[a-zA-Z_:]/;

const LABEL_START = /[a-zA-Z_]/;
const LABEL_CHAR = /[a-zA-Z0-9_]/;

/** Parse a whole exposition. Never throws on bad input. */
export function parsePrometheusText(text: string, options: PromParseOptions = {}): PromParseResult {
  const samples = new Map<string, PromSample[]>();
  const types = new Map<string, string>();
  const issues: PromParseIssue[] = [];
  // Lines are walked by index, not split: most of a vLLM exposition is histogram lines
  // the scraper skips, and allocating each of them cost more than the parse itself.
  const n = text.length;
  let lineNo = 0;
  for (let start = 0; start < n; ) {
    let end = text.indexOf("\n", start);
    if (end < 0) end = n;
    lineNo++;
    let a = start;
    while (a < end && text.charCodeAt(a) <= 32) a++;
    let b = end;
    if (b > a && text.charCodeAt(b - 1) === 13) b--;
    start = end + 1;
    if (a >= b) continue;
    if (text.charCodeAt(a) === 35) {
      let j = a + 1;
      while (j < b && text.charCodeAt(j) <= 32) j++;
      if (j > a + 1 && text.startsWith("TYPE", j)) {
        const m = /^#\s+TYPE\s+(\S+)\s+(\S+)/.exec(text.slice(a, b));
        if (m !== null) types.set(m[1]!, m[2]!);
      }
      continue;
    }
    if (options.names !== undefined && !options.names.has(text.slice(a, nameEnd(text, a, b)))) {
      continue;
    }
    try {
      const s = parseSampleLine(text.slice(a, b));
      let list = samples.get(s.name);
      if (list === undefined) {
        list = [];
        samples.set(s.name, list);
      }
      list.push(s);
    } catch (err) {
      if (!(err instanceof LineError)) throw err;
      issues.push({ line: lineNo, message: err.message });
    }
  }
  return { samples, types, issues };
}

/** End of the metric name starting at `from` (char codes: a regex per char was most of a scrape's parse). */
function nameEnd(s: string, from = 0, to = s.length): number {
  let i = from;
  for (; i < to; i++) {
    const c = s.charCodeAt(i);
    const ok =
      (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || (c >= 48 && c <= 57) || c === 95 || c === 58;
    if (!ok) break;
  }
  return i;
}

/** Parse one sample line (no leading whitespace). Throws `LineError`. */
function parseSampleLine(s: string): PromSample {
  if (!NAME_START.test(s[0] ?? "")) throw new LineError(`invalid metric name start in: ${clip(s)}`);
  let i = nameEnd(s);
  const name = s.slice(0, i);
  const labels: Record<string, string> = {};
  if (s[i] === "{") {
    i = parseLabels(s, i + 1, labels);
  }
  const rest = s.slice(i).trim().split(/\s+/);
  if (rest.length === 0 || rest[0] === "") throw new LineError(`missing value for ${name}`);
  if (rest.length > 2) throw new LineError(`unexpected text after value of ${name}: ${clip(s)}`);
  const value = parseValue(rest[0]!, name);
  let timestamp: number | null = null;
  if (rest.length === 2) {
    timestamp = Number(rest[1]);
    if (!Number.isFinite(timestamp))
      throw new LineError(`invalid timestamp for ${name}: ${rest[1]}`);
  }
  return { name, labels, value, timestamp };
}

/** Parses `a="x",b="y"}` starting after `{`; returns the index after `}`. */
function parseLabels(s: string, start: number, out: Record<string, string>): number {
  let i = start;
  for (;;) {
    while (s[i] === " " || s[i] === "\t") i++;
    if (s[i] === "}") return i + 1;
    if (!LABEL_START.test(s[i] ?? ""))
      throw new LineError(`invalid label name at column ${i + 1}: ${clip(s)}`);
    const ns = i;
    while (i < s.length && LABEL_CHAR.test(s[i]!)) i++;
    const label = s.slice(ns, i);
    while (s[i] === " " || s[i] === "\t") i++;
    if (s[i] !== "=") throw new LineError(`expected '=' after label ${label}`);
    i++;
    while (s[i] === " " || s[i] === "\t") i++;
    if (s[i] !== '"') throw new LineError(`expected '"' to open the value of label ${label}`);
    i++;
    let value = "";
    for (;;) {
      const c = s[i];
      if (c === undefined) throw new LineError(`unterminated value of label ${label}`);
      if (c === '"') break;
      if (c === "\\") {
        const e = s[i + 1];
        if (e === "n") value += "\n";
        else if (e === "\\" || e === '"') value += e;
        else if (e === undefined) throw new LineError(`unterminated value of label ${label}`);
        else value += `\\${e}`; // unknown escape: kept literally, as Prometheus does
        i += 2;
        continue;
      }
      value += c;
      i++;
    }
    i++;
    if (Object.hasOwn(out, label)) throw new LineError(`duplicate label ${label}`);
    out[label] = value;
    while (s[i] === " " || s[i] === "\t") i++;
    if (s[i] === ",") i++;
    else if (s[i] !== "}") throw new LineError(`expected ',' or '}' after label ${label}`);
  }
}

function parseValue(token: string, name: string): number {
  switch (token) {
    case "+Inf":
    case "Inf":
    case "+inf":
    case "inf":
      return Infinity;
    case "-Inf":
    case "-inf":
      return -Infinity;
    case "NaN":
    case "nan":
      return Number.NaN;
  }
  // Number("") is 0 and Number("0x10") is 16: accept only decimal float syntax.
  if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(token)) {
    throw new LineError(`invalid value for ${name}: ${token}`);
  }
  return Number(token);
}
