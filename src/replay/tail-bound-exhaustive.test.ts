/**
 * The tail report's bounds (`tail-bound.ts`) checked against every placement, not just
 * the replay's policies: on tiny random traces (7 requests, 2 and 3 workers, unlimited
 * and small caches, 2 running slots per worker) each placement of the requests on the
 * workers is simulated, and no served request's TTFT is below its bound; for several
 * goal lines, the fewest requests above the line over all placements is at least forced
 * + overlap. And the overlap count's greedy (sweep by start, drop the span ending last)
 * against the true minimum by brute force on random interval sets.
 */

import { describe, expect, it } from "vitest";
import type { RoutingPolicy } from "./policies.js";
import { runReplay } from "./run-replay.js";
import { overlapLate, ttftLowerBounds } from "./tail-bound.js";
import { branchingTrace, xorshift } from "./test-helpers.js";

// 1,000 tokens/s and 500 ms per prefill; 2 running slots, so slots can also hold a request.
const timing = {
  prefillTokensPerSec: 1000,
  prefillOverheadMs: 500,
  decodeMsPerToken: 25,
  maxNumSeqs: 2,
};

/** The fewest spans to drop so that no instant is covered more than `k` times (all subsets). */
function bruteMinDrop(spans: readonly (readonly [number, number])[], k: number): number {
  const n = spans.length;
  let best = n;
  for (let mask = 0; mask < 1 << n; mask++) {
    let dropped = 0;
    for (let i = 0; i < n; i++) if (mask & (1 << i)) dropped++;
    if (dropped >= best) continue;
    const kept = spans.filter((_, i) => !(mask & (1 << i)));
    // Coverage peaks at some span's start (spans are [start, end)).
    const ok = kept.every(([s]) => kept.filter(([s2, e2]) => s2 <= s && e2 > s).length <= k);
    if (ok) best = dropped;
  }
  return best;
}

/** A policy placing request i on `assign[i]`. */
const fixed = (assign: readonly number[]) => (): RoutingPolicy => ({
  name: "fixed",
  wantsKvEvents: false,
  choose: (r) => assign[r.index]!,
});

describe("the overlap count", () => {
  it("drops the fewest spans: the greedy equals the brute-force minimum", () => {
    const r = xorshift(7);
    const line = 10;
    let positive = 0;
    for (let trial = 0; trial < 2000; trial++) {
      const n = 1 + Math.floor(r() * 10);
      const workers = 1 + Math.floor(r() * 3);
      const arrival: number[] = [];
      const prefillBound: number[] = [];
      const ttftBound: number[] = [];
      const spans: [number, number][] = [];
      for (let i = 0; i < n; i++) {
        const a = Math.floor(r() * 10);
        const p = 1 + Math.floor(r() * 9);
        const b = p + Math.floor(r() * 3);
        arrival.push(a);
        prefillBound.push(p);
        ttftBound.push(b);
        // The spans by their definition (tail-bound.ts, point 2), forced ones left out.
        if (b <= line && a + line - p < a + b) spans.push([a + line - p, a + b]);
      }
      const late = overlapLate(arrival, prefillBound, ttftBound, line, workers);
      expect(late).toBe(bruteMinDrop(spans, workers));
      if (late > 0) positive++;
    }
    expect(positive).toBeGreaterThan(100); // the sets do overlap past the workers
  });
});

describe("the bounds against every placement", () => {
  it("no TTFT below its bound; the fewest above each line ≥ forced + overlap", () => {
    const n = 7;
    const lines = [1000, 1500, 2000, 2500, 3000, 4000];
    let placements = 0;
    let tight = 0;
    let lateCells = 0;
    for (let seed = 1; seed <= 6; seed++) {
      const trace = branchingTrace(seed, n);
      const b = ttftLowerBounds(trace, timing, 16);
      for (const workers of [2, 3]) {
        for (const capacityBlocks of [null, 120]) {
          const minTtft = new Array<number>(n).fill(Number.POSITIVE_INFINITY);
          const fewestAbove = lines.map(() => Number.POSITIVE_INFINITY);
          for (let code = 0; code < workers ** (n - 1); code++) {
            // Request 0 on worker 0: the workers are interchangeable.
            const assign = [0];
            for (let c = code, i = 1; i < n; i++, c = Math.floor(c / workers)) {
              assign.push(c % workers);
            }
            const run = runReplay(
              trace,
              fixed(assign),
              {
                workers,
                capacityBlocks,
                blockSize: 16,
                timing,
                seed: 1,
                eventDelayMs: 0,
                scrapeIntervalMs: 0,
              },
              { tail: true },
            );
            const d = run.tail!;
            expect(d.hitAboveBest).toBe(0);
            for (let k = 0; k < d.ttftMs.length; k++) {
              const i = d.index[k]!;
              expect(d.ttftMs[k]! + 1e-6).toBeGreaterThanOrEqual(b.ttftBoundMs[i]!);
              minTtft[i] = Math.min(minTtft[i]!, d.ttftMs[k]!);
            }
            if (d.ttftMs.length < n) continue; // a request dropped: not a placement of all
            placements++;
            lines.forEach((line, j) => {
              const above = d.ttftMs.filter((t) => t > line).length;
              fewestAbove[j] = Math.min(fewestAbove[j]!, above);
            });
          }
          for (let i = 0; i < n; i++) if (Math.abs(minTtft[i]! - b.ttftBoundMs[i]!) < 1e-6) tight++;
          const arrival = trace.map((r) => r.arrivalMs);
          lines.forEach((line, j) => {
            const forced = b.ttftBoundMs.filter((x) => x > line).length;
            const late = overlapLate(arrival, b.prefillBoundMs, b.ttftBoundMs, line, workers);
            if (late > 0) lateCells++;
            if (fewestAbove[j]! < Number.POSITIVE_INFINITY) {
              expect(fewestAbove[j]!).toBeGreaterThanOrEqual(forced + late);
            }
          });
        }
      }
    }
    // The check has teeth: many placements, bounds reached, and the overlap not always 0.
    expect(placements).toBeGreaterThan(1000);
    expect(tight).toBeGreaterThan(0);
    expect(lateCells).toBeGreaterThan(0);
  });
});
