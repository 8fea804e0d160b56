/**
 * Lower bounds for the tail report (`tail-data.ts`, `tail-report.ts`) that hold for every
 * router, in the replay's timing model (`timing-model.ts`: a worker computes one prompt
 * at a time, FIFO in arrival order, `prefillOverheadMs` + uncached tokens / rate).
 *
 * 1. Per request, `ttftLowerBounds`. A request's TTFT is its wait plus its prefill on the
 *    worker that runs it. Its hit there comes from blocks some *earlier* request put in
 *    that worker's cache; that request is ahead of it in the same FIFO queue, so this one
 *    cannot start before that one's prefill has ended — at the earliest its arrival plus
 *    its own TTFT bound. So for a hit of h tokens whose deepest page came from request e:
 *
 *      TTFT ≥ max(0, a_e + bound_e − a) + prefill(prompt − h)
 *
 *    and the bound is the least of that over every earlier request sharing a prefix, and
 *    of the whole prompt computed with no wait. Per trace block (hash_ids name prefixes)
 *    it keeps the longest prompt through the block and the earliest any prompt through it
 *    can have finished — mixing two requests' figures can only lower the bound. Without
 *    the wait term this is the earlier bound (the best hit of one infinite cache,
 *    `ceiling.ts`), so the new one is never lower; it is higher for a request that
 *    arrives while the prompt holding its prefix cannot have been computed yet.
 *
 * 2. Over requests, `overlapLate`: a request under the line of length L must start by
 *    a + L − prefill (latest start, with its best hit) and cannot end before a + bound,
 *    so when the latest start is before the earliest end it is in prefill throughout
 *    [a + L − prefill, a + bound) — on some worker. At most `workers` prompts are in
 *    prefill at any instant, so when more such intervals cover one instant the rest are
 *    above the line. The least number of intervals to drop so that no instant is covered
 *    more than `workers` times (sweep by start, drop the one ending last; exact for
 *    intervals) is a lower bound on the requests above the line besides the forced ones.
 */

import { sharedPageTokens } from "./ceiling.js";
import { prefillMs, type TimingModel } from "./timing-model.js";
import type { TraceRequest } from "./trace.js";

/** Per request of the trace, in trace order (ms). */
export interface TtftBounds {
  /** The best possible hit: the longest prefix of any earlier request, whole pages. */
  readonly bestHitTokens: Int32Array;
  /** Prefill with the best possible hit: a lower bound on its prefill on any worker. */
  readonly prefillBoundMs: Float64Array;
  /** Lower bound on its TTFT under any router (point 1 of the header); ≥ prefillBoundMs. */
  readonly ttftBoundMs: Float64Array;
}

interface BlockSeen {
  /** Longest prompt through this block. */
  maxLength: number;
  /** Earliest time any prompt through it can have finished its prefill. */
  earliestDoneMs: number;
}

/** The bounds of every request of `requests` (time-sorted, as `loadTrace` returns them). */
export function ttftLowerBounds(
  requests: readonly TraceRequest[],
  timing: Pick<TimingModel, "prefillTokensPerSec" | "prefillOverheadMs">,
  blockSize: number,
): TtftBounds {
  const n = requests.length;
  const bestHitTokens = new Int32Array(n);
  const prefillBoundMs = new Float64Array(n);
  const ttftBoundMs = new Float64Array(n);
  const seen = new Map<number, BlockSeen>();
  for (let i = 0; i < n; i++) {
    const r = requests[i]!;
    const ids = r.hashIds;
    let best = 0;
    let bound = prefillMs(timing, r.inputLength);
    for (let b = 0; b < ids.length; b++) {
      const s = seen.get(ids[b]!);
      if (s === undefined) break;
      const hit = sharedPageTokens(b + 1, s.maxLength, r.inputLength, blockSize);
      if (hit > best) best = hit;
      const t =
        Math.max(0, s.earliestDoneMs - r.arrivalMs) + prefillMs(timing, r.inputLength - hit);
      if (t < bound) bound = t;
    }
    bestHitTokens[i] = best;
    prefillBoundMs[i] = prefillMs(timing, r.inputLength - best);
    ttftBoundMs[i] = bound;
    const done = r.arrivalMs + bound;
    for (const id of ids) {
      const s = seen.get(id);
      if (s === undefined) seen.set(id, { maxLength: r.inputLength, earliestDoneMs: done });
      else {
        if (r.inputLength > s.maxLength) s.maxLength = r.inputLength;
        if (done < s.earliestDoneMs) s.earliestDoneMs = done;
      }
    }
  }
  return { bestHitTokens, prefillBoundMs, ttftBoundMs };
}

/**
 * Point 2 of the header: how many of the requests whose TTFT bound is at most `lineMs`
 * must still be above it, because more than `workers` of them would have to be in
 * prefill at one instant. Arrays are per served request (any order).
 */
export function overlapLate(
  arrivalMs: ArrayLike<number>,
  prefillBoundMs: ArrayLike<number>,
  ttftBoundMs: ArrayLike<number>,
  lineMs: number,
  workers: number,
): number {
  const spans: [number, number][] = [];
  for (let k = 0; k < arrivalMs.length; k++) {
    if (ttftBoundMs[k]! > lineMs) continue; // forced: counted on its own
    const latestStart = arrivalMs[k]! + lineMs - prefillBoundMs[k]!;
    const earliestEnd = arrivalMs[k]! + ttftBoundMs[k]!;
    if (latestStart < earliestEnd) spans.push([latestStart, earliestEnd]);
  }
  spans.sort((x, y) => x[0] - y[0]);
  const open: number[] = []; // ends of the kept spans covering the sweep point (≤ workers + 1)
  let late = 0;
  for (const [start, end] of spans) {
    for (let j = open.length - 1; j >= 0; j--) if (open[j]! <= start) open.splice(j, 1);
    open.push(end);
    if (open.length > workers) {
      let last = 0;
      for (let j = 1; j < open.length; j++) if (open[j]! > open[last]!) last = j;
      open.splice(last, 1);
      late++;
    }
  }
  return late;
}
