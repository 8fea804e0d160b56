/**
 * `kvrouter trace spread`: undo a trace's timestamp quantisation. Some published traces
 * round arrivals to a coarse grid (the Mooncake conversation trace: whole seconds, 89 %
 * of requests sharing their millisecond with the one before, up to 19 at once), which a
 * replay takes literally as simultaneous bursts. Requests that share a timestamp `t` are
 * spread over `[t, t + window)`, where the window is `windowMs` cut at the next distinct
 * timestamp: seeded uniform offsets, sorted and given out in file order, so the order of
 * the file (and of each session's turns) is kept and every request stays within its own
 * quantum. Everything else on each line is kept as it was.
 */

import { seededRng } from "../../util/rng.js";

/** One trace line as parsed JSON: only `timestamp` is read and rewritten. */
export interface TimedLine {
  readonly timestamp: number;
  readonly [key: string]: unknown;
}

/**
 * The lines with arrivals spread (a new array; the input is sorted by timestamp, stable,
 * first). Timestamps stay integers (ms). `windowMs` 0 returns the sorted input.
 */
export function spreadArrivals<L extends TimedLine>(
  lines: readonly L[],
  windowMs: number,
  seed: number,
): L[] {
  if (!(windowMs >= 0)) throw new RangeError("windowMs must be ≥ 0");
  const sorted = [...lines].sort((a, b) => a.timestamp - b.timestamp);
  const rng = seededRng(seed);
  const out: L[] = [];
  for (let i = 0; i < sorted.length; ) {
    const t = sorted[i]!.timestamp;
    let j = i;
    while (j < sorted.length && sorted[j]!.timestamp === t) j++;
    const next = j < sorted.length ? sorted[j]!.timestamp : Number.POSITIVE_INFINITY;
    const width = Math.floor(Math.min(windowMs, next - t));
    const offsets = Array.from({ length: j - i }, () => Math.floor(rng() * width));
    offsets.sort((a, b) => a - b);
    for (let k = i; k < j; k++) out.push({ ...sorted[k]!, timestamp: t + offsets[k - i]! });
    i = j;
  }
  return out;
}

/**
 * The trace's grid: the most common gap between consecutive distinct timestamps (3000 ms
 * for the Mooncake conversation trace); 0 for fewer than two distinct timestamps.
 */
export function arrivalGrid(lines: readonly TimedLine[]): number {
  const ts = [...new Set(lines.map((l) => l.timestamp))].sort((a, b) => a - b);
  const counts = new Map<number, number>();
  let best = 0;
  let bestCount = 0;
  for (let i = 1; i < ts.length; i++) {
    const g = ts[i]! - ts[i - 1]!;
    const c = (counts.get(g) ?? 0) + 1;
    counts.set(g, c);
    if (c > bestCount || (c === bestCount && g < best)) {
      best = g;
      bestCount = c;
    }
  }
  return best;
}

/** Quantisation figures of a trace, for the command's report. */
export function arrivalStats(lines: readonly TimedLine[]): {
  readonly distinct: number;
  readonly sameAsPrevious: number;
  readonly largestGroup: number;
} {
  let distinct = 0;
  let same = 0;
  let run = 0;
  let largest = 0;
  let prev = Number.NaN;
  for (const l of [...lines].sort((a, b) => a.timestamp - b.timestamp)) {
    if (l.timestamp === prev) {
      same++;
      run++;
    } else {
      distinct++;
      run = 1;
      prev = l.timestamp;
    }
    largest = Math.max(largest, run);
  }
  return { distinct, sameAsPrevious: same, largestGroup: largest };
}
