/**
 * Per-request figures for the tail report (`--tail-report`, `tail-report.ts`), taken from
 * one run's outcomes after it ends: what each served request waited and computed, what
 * was ahead of it on its worker, and a lower bound on its TTFT that holds for any router.
 *
 * The lower bound, in the replay's timing model (`timing-model.ts`): a request's TTFT is
 * its queue wait (≥ 0) plus its prefill, `prefillOverheadMs` + uncached tokens / rate on
 * whichever worker runs it. Its cached tokens on any worker are at most the longest
 * prefix it shares with an earlier request of the trace (a worker's cache holds only
 * blocks of prompts admitted before it, and admission is FIFO in arrival order), whole
 * pages only and never its last token: exactly the hit of one infinite cache fed the
 * whole trace (`ceiling.ts`; counted from hash_ids, which can only overstate the shared
 * prefix, never understate it). So TTFT ≥ prefillMs(inputLength − bestHit) under any
 * placement. Every run checks it: a request whose real hit exceeds that best is counted
 * in `hitAboveBest` (the report then refuses to call anything proven). The TTFT bound
 * also counts the wait for the prompt that holds that prefix (`tail-bound.ts`): the bound
 * kept here is the stronger one, with the prefill bound beside it.
 *
 * Memory: a dozen numbers per served request, in typed arrays (12,031 requests ≈ 1 MB).
 */

import type { RequestOutcome } from "./sim-fleet.js";
import { ttftLowerBounds } from "./tail-bound.js";
import type { TimingModel } from "./timing-model.js";
import type { TraceRequest } from "./trace.js";

/** One run's per-request tail figures (served requests, in trace order). Times in ms. */
export interface TailData {
  /** Trace index of each served request. */
  readonly index: Int32Array;
  readonly worker: Int32Array;
  readonly arrivalMs: Float64Array;
  readonly inputTokens: Int32Array;
  /** Prompt tokens its worker's cache served. */
  readonly hitTokens: Int32Array;
  /** The most any worker's cache could have served (longest prefix of any earlier request). */
  readonly bestHitTokens: Int32Array;
  readonly ttftMs: Float64Array;
  /** Arrival to start of prefill. */
  readonly waitMs: Float64Array;
  /** Start of prefill to first token. */
  readonly prefillMs: Float64Array;
  /** Prefill with the best hit: a lower bound on its prefill on any worker. */
  readonly prefillBoundMs: Float64Array;
  /**
   * TTFT lower bound under any router: the prefill bound, or less prefill after waiting
   * for the earlier prompt that holds the prefix to be computed (`tail-bound.ts`).
   */
  readonly boundMs: Float64Array;
  /** What was left of the prefill in progress on its worker when it arrived (0: none). */
  readonly aheadMs: Float64Array;
  /** Trace index of that request (−1: none). */
  readonly aheadIndex: Int32Array;
  /** Prefill time its worker spent on others between its arrival and its start. */
  readonly busyAheadMs: Float64Array;
  /**
   * Time from its arrival until the first worker whose prefills submitted before it were
   * done (the run's placements of the others kept; prefill only, not slots or blocks).
   */
  readonly firstFreeWaitMs: Float64Array;
  /** Requests whose real hit exceeded `bestHitTokens` (must be 0: the bound's check). */
  readonly hitAboveBest: number;
  /** Requests whose TTFT was below `boundMs` (must be 0: the bound's check). */
  readonly ttftBelowBound: number;
  /** The fleet's size (at most this many prompts are in prefill at once). */
  readonly workers: number;
}

/**
 * The tail figures of a finished run. `outcomes` are in trace order (submission order),
 * `workers` the fleet size, `timing` the fleet workers' model.
 */
export function collectTail(
  requests: readonly TraceRequest[],
  outcomes: readonly RequestOutcome[],
  workers: number,
  timing: TimingModel,
  blockSize: number,
): TailData {
  const bounds = ttftLowerBounds(requests, timing, blockSize);
  const best = bounds.bestHitTokens;
  const served = outcomes.filter((o) => !o.rejected);
  const n = served.length;
  const d = {
    index: new Int32Array(n),
    worker: new Int32Array(n),
    arrivalMs: new Float64Array(n),
    inputTokens: new Int32Array(n),
    hitTokens: new Int32Array(n),
    bestHitTokens: new Int32Array(n),
    ttftMs: new Float64Array(n),
    waitMs: new Float64Array(n),
    prefillMs: new Float64Array(n),
    prefillBoundMs: new Float64Array(n),
    boundMs: new Float64Array(n),
    aheadMs: new Float64Array(n),
    aheadIndex: new Int32Array(n).fill(-1),
    busyAheadMs: new Float64Array(n),
    firstFreeWaitMs: new Float64Array(n),
  };
  // Per worker: its served requests in submission order (= start order: FIFO) and the
  // running sum of their prefill times, to read the prefill work queued ahead of each.
  const lists: number[][] = Array.from({ length: workers }, () => []);
  for (let k = 0; k < n; k++) lists[served[k]!.worker]!.push(k);
  const posInList = new Int32Array(n);
  const sums: Float64Array[] = lists.map((l) => {
    const s = new Float64Array(l.length + 1);
    l.forEach((k, j) => {
      posInList[k] = j;
      s[j + 1] = s[j]! + (served[k]!.firstTokenMs - served[k]!.startMs);
    });
    return s;
  });
  const startedBy = new Int32Array(workers); // entries of each list with start ≤ now
  const lastEnd = new Float64Array(workers).fill(Number.NEGATIVE_INFINITY);
  let hitAboveBest = 0;
  let ttftBelowBound = 0;
  for (let k = 0; k < n; k++) {
    const o = served[k]!;
    const a = o.arrivalMs;
    const w = o.worker;
    const b = best[o.index]!;
    d.index[k] = o.index;
    d.worker[k] = w;
    d.arrivalMs[k] = a;
    d.inputTokens[k] = o.inputTokens;
    d.hitTokens[k] = o.hitTokens;
    d.bestHitTokens[k] = b;
    if (o.hitTokens > b) hitAboveBest++;
    d.ttftMs[k] = o.firstTokenMs - a;
    d.waitMs[k] = o.startMs - a;
    d.prefillMs[k] = o.firstTokenMs - o.startMs;
    d.prefillBoundMs[k] = bounds.prefillBoundMs[o.index]!;
    d.boundMs[k] = bounds.ttftBoundMs[o.index]!;
    if (d.ttftMs[k]! < d.boundMs[k]! - 1e-6) ttftBelowBound++;
    let firstFree = Number.POSITIVE_INFINITY;
    for (let v = 0; v < workers; v++) firstFree = Math.min(firstFree, Math.max(a, lastEnd[v]!));
    d.firstFreeWaitMs[k] = firstFree - a;
    // What its worker was doing at its arrival: the last request (before it) that had
    // started by then is the one possibly still in prefill; those after it ran in between.
    const list = lists[w]!;
    const j = posInList[k]!;
    while (startedBy[w]! < list.length && served[list[startedBy[w]!]!]!.startMs <= a) {
      startedBy[w]!++;
    }
    const before = Math.min(startedBy[w]!, j); // list entries before it started by `a`
    let ahead = 0;
    if (before > 0) {
      const cur = served[list[before - 1]!]!;
      if (cur.firstTokenMs > a) {
        ahead = cur.firstTokenMs - a;
        d.aheadIndex[k] = cur.index;
      }
    }
    d.aheadMs[k] = ahead;
    d.busyAheadMs[k] = ahead + (sums[w]![j]! - sums[w]![before]!);
    lastEnd[w] = Math.max(lastEnd[w]!, o.firstTokenMs);
  }
  return { ...d, hitAboveBest, ttftBelowBound, workers };
}
