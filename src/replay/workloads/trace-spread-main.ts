/**
 * `kvrouter trace spread FILE`: rewrite a trace with its quantised arrivals spread
 * (`spread-arrivals.ts`), to stdout or `--out FILE`; reports the quantisation before and
 * after on stderr. Every line is checked as the replay checks it (a bad line is named
 * and nothing is written).
 */

import { readFileSync, writeFileSync } from "node:fs";
import { parseTraceLine, TraceFormatError } from "../trace.js";
import { arrivalGrid, arrivalStats, spreadArrivals, type TimedLine } from "./spread-arrivals.js";
import { parseTraceArgs, TraceUsageError } from "./trace-args.js";

export const SPREAD_USAGE = `usage: kvrouter trace spread FILE [--window-ms X] [--seed S] [--out FILE]

Spreads requests that share a timestamp over [t, t + X ms), cut at the next distinct
timestamp, keeping their order: for traces whose arrivals are rounded to a coarse grid
(the Mooncake conversation trace is on a 3 s grid). Other fields are kept.

  --window-ms X           spread window (default: the trace's grid, the most common gap
                          between distinct timestamps)
  --seed S                seed of the offsets (default 1)
  --out FILE              write here instead of stdout
`;

export interface SpreadArgs {
  readonly file: string;
  /** null: the trace's grid. */
  readonly windowMs: number | null;
  readonly seed: number;
  readonly out: string | null;
}

/** Parse `spread FILE …` (argv after `trace`); null for --help. */
export function parseSpreadArgs(argv: readonly string[]): SpreadArgs | null {
  const parsed = parseTraceArgs(argv, ["window-ms", "seed", "out"]);
  const v = parsed.values;
  if (v.help) return null;
  const [verb, file, extra] = parsed.positionals;
  if (verb !== "spread") throw new TraceUsageError(`expected 'spread', got '${verb ?? ""}'`);
  if (file === undefined) throw new TraceUsageError("FILE is required");
  if (extra !== undefined) throw new TraceUsageError(`unexpected argument '${extra}'`);
  const num = <T>(flag: string, fallback: T, ok: (x: number) => boolean, what: string) => {
    const raw = v[flag];
    if (typeof raw !== "string") return fallback;
    const x: number | T = Number(raw);
    if (raw.trim() === "" || !ok(x)) {
      throw new TraceUsageError(`--${flag} must be ${what}, got '${raw}'`);
    }
    return x;
  };
  return {
    file,
    windowMs: num<number | null>(
      "window-ms",
      null,
      (x) => Number.isFinite(x) && x >= 0,
      "a number ≥ 0",
    ),
    seed: num("seed", 1, Number.isSafeInteger, "an integer"),
    out: typeof v.out === "string" ? v.out : null,
  };
}

/** Reads, checks, spreads and writes; returns the exit code (0 ok, 1 bad trace). */
export function runSpread(o: SpreadArgs, err: (s: string) => void): number {
  const lines: TimedLine[] = [];
  let text: string[];
  try {
    text = readFileSync(o.file, "utf8").split("\n");
  } catch (e) {
    err(`kvrouter trace spread: cannot read ${o.file}: ${(e as Error).message}\n`);
    return 1;
  }
  try {
    for (let i = 0; i < text.length; i++) {
      const t = text[i]!.trim();
      if (t === "") continue;
      parseTraceLine(t, i + 1); // the replay's own checks
      lines.push(JSON.parse(t) as TimedLine);
    }
  } catch (e) {
    if (!(e instanceof TraceFormatError)) throw e;
    err(`kvrouter trace spread: ${o.file}: ${e.message}\n`);
    return 1;
  }
  const windowMs = o.windowMs ?? arrivalGrid(lines);
  const spread = spreadArrivals(lines, windowMs, o.seed);
  const show = (s: ReturnType<typeof arrivalStats>) =>
    `${s.distinct} distinct arrival times, ${s.sameAsPrevious} requests sharing the previous one's, at most ${s.largestGroup} at once`;
  err(
    `window ${windowMs} ms\nbefore: ${show(arrivalStats(lines))}\nafter:  ${show(arrivalStats(spread))}\n`,
  );
  const out = spread.map((l) => JSON.stringify(l)).join("\n") + (spread.length > 0 ? "\n" : "");
  if (o.out === null) process.stdout.write(out);
  else writeFileSync(o.out, out);
  return 0;
}
