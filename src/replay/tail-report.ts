/**
 * The tail report (`kvrouter replay --tail-report`): is "p99 TTFT ≤ factor × the one-pool
 * reference's p99" met, could any router meet it, and which requests are above the line
 * and why. Computed from a run's per-request figures (`tail-data.ts`) and the reference
 * run's p99; docs/replay.md, "Where the p99 tail comes from", reads it.
 *
 * The p99 is the nearest-rank percentile (`metrics.ts`): of n served requests it is the
 * ⌈0.99·n⌉-th smallest TTFT, so it is at most the line exactly when at most
 * n − ⌈0.99·n⌉ requests (the allowance) are above it. A request is *forced* when its TTFT
 * lower bound under any router is above the line (`tail-bound.ts`, point 1). The other
 * requests above the line get the first cause that applies:
 *
 * - `ownPrefill`: its own prefill, with the hit it got, is above the line — the longest
 *   prefix an earlier request left would have brought it under (it was elsewhere, or
 *   evicted by then);
 * - `headOfLine`: the rest of the prefill in progress on its worker when it arrived plus
 *   its own prefill is above the line (one long prompt ahead of it);
 * - `backlog`: the prefill time its worker spent on requests queued ahead of it, plus its
 *   own prefill, is above the line (several requests ahead);
 * - `slots`: the rest — it waited while its worker's prefill was idle, for a running slot
 *   or free KV blocks.
 *
 * Besides the forced requests, `overlapLate` more must be above the line under any router:
 * more requests under it would have to be in prefill at one instant than there are
 * workers (`tail-bound.ts`, point 2). forced + overlapLate > allowance proves that no
 * placement of the requests meets the goal, and room = allowance − forced − overlapLate
 * is what is left for every other cause. Proven in the replay's timing model only
 * (whole-prompt prefill, FIFO, one prompt in prefill at a time per worker, a prefix
 * reusable once its prompt's prefill has ended), not for an engine that shares blocks of
 * a prompt still in chunked prefill or runs several prompts' prefills at once.
 *
 * Also counted: requests above the line even had they started on the worker that freed
 * first at their arrival with the best possible hit, not before their TTFT bound
 * (`aboveOnFirstFree`; the run's other placements kept, so an estimate, not a bound over
 * routers).
 */

import { percentile } from "./metrics.js";
import { overlapLate } from "./tail-bound.js";
import type { TailData } from "./tail-data.js";

/** `--tail-report`, `--tail-factor`, `--tail-policy`. */
export interface TailOptions {
  /** The goal line is factor × the reference's p99 (the goal: 2). */
  readonly factor: number;
  /** Policies reported on. */
  readonly policies: readonly string[];
  /** `--tail-requests`: where to write the requests above the line (JSON lines); null = nowhere. */
  readonly requestsFile?: string | null;
}

export const TAIL_CLASSES = ["forced", "ownPrefill", "headOfLine", "backlog", "slots"] as const;
export type TailClass = (typeof TAIL_CLASSES)[number];

/** Ranges over one class's requests (null when the class is empty). */
export interface TailClassStats {
  readonly count: number;
  readonly promptTokens: readonly [number, number] | null;
  readonly hitTokens: readonly [number, number] | null;
  readonly waitMs: readonly [number, number] | null;
  readonly prefillMs: readonly [number, number] | null;
}

export interface TailReport {
  readonly policy: string;
  readonly factor: number;
  readonly referenceP99Ms: number;
  /** factor × referenceP99Ms. */
  readonly lineMs: number;
  /** Served requests of the policy's run. */
  readonly requests: number;
  /**
   * Requests the reference served (null: not known). The two p99s are over these sets:
   * a policy that drops requests the reference served is compared on fewer of them.
   */
  readonly referenceRequests: number | null;
  /** Of the reference's served requests, how many this policy dropped (null: not known). */
  readonly droppedServedByReference: number | null;
  /** How many may be above the line with the p99 still at or below it. */
  readonly allowance: number;
  readonly p99Ms: number;
  /** Requests above the line. */
  readonly above: number;
  /** p99 ≤ line, over at least one served request (a run that served nothing meets nothing). */
  readonly met: boolean;
  /** Requests above the line under any router (their lower bound is above it). */
  readonly forced: number;
  /**
   * Of the others, how many must be above the line under any router all the same: more
   * of them would have to be in prefill at one instant than there are workers.
   */
  readonly overlapLate: number;
  /**
   * The p99 of the per-request lower bounds: no router's p99 can be below it (each
   * request's TTFT is at least its bound, so every order statistic is too).
   */
  readonly p99FloorMs: number;
  /** forced + overlapLate > allowance (and the bound checked out): no placement meets the goal. */
  readonly unreachable: boolean;
  /** allowance − forced − overlapLate: room left for every other cause (negative when unreachable). */
  readonly room: number;
  readonly classes: Readonly<Record<TailClass, TailClassStats>>;
  /**
   * Above the line even on the first-free worker with the best hit, not before its bound
   * (an estimate; forced ones included).
   */
  readonly aboveOnFirstFree: number;
  /** Requests whose real hit exceeded the bound's best hit (0, or the bound is wrong). */
  readonly hitAboveBest: number;
  /**
   * The bounds' checks on this run: requests whose TTFT was below their bound, and
   * whether fewer requests were above the line than forced + overlapLate (0 and false,
   * or a bound is wrong and nothing is called proven).
   */
  readonly ttftBelowBound: number;
  readonly fewerAboveThanProven: boolean;
}

/** n − ⌈0.99·n⌉: requests that may exceed the line with the p99 still on or under it. */
export function p99Allowance(n: number): number {
  return n - Math.min(n, Math.max(1, Math.ceil(0.99 * n)));
}

/** Which cause puts request k above `lineMs` (it must be above it). */
export function classify(d: TailData, k: number, lineMs: number): TailClass {
  const own = d.prefillMs[k]!;
  if (d.boundMs[k]! > lineMs) return "forced";
  if (own > lineMs) return "ownPrefill";
  if (d.aheadMs[k]! + own > lineMs) return "headOfLine";
  if (d.busyAheadMs[k]! + own > lineMs) return "backlog";
  return "slots";
}

function range(xs: readonly number[]): readonly [number, number] | null {
  if (xs.length === 0) return null;
  let lo = xs[0]!;
  let hi = lo;
  for (const x of xs) {
    if (x < lo) lo = x;
    if (x > hi) hi = x;
  }
  return [lo, hi];
}

/** Of `referenceServed` (trace indices), how many are not among `served`. */
export function droppedOf(referenceServed: ArrayLike<number>, served: ArrayLike<number>): number {
  const here = new Set<number>(Array.from(served));
  let dropped = 0;
  for (let i = 0; i < referenceServed.length; i++) if (!here.has(referenceServed[i]!)) dropped++;
  return dropped;
}

/**
 * The report for one policy's run against the reference's p99; `referenceServed`, the
 * trace indices the reference served, when known (to count what this policy dropped).
 */
export function tailReport(
  policy: string,
  d: TailData,
  referenceP99Ms: number,
  factor: number,
  referenceServed: ArrayLike<number> | null = null,
): TailReport {
  const n = d.ttftMs.length;
  const lineMs = factor * referenceP99Ms;
  const members: Record<TailClass, number[]> = {
    forced: [],
    ownPrefill: [],
    headOfLine: [],
    backlog: [],
    slots: [],
  };
  let above = 0;
  let aboveOnFirstFree = 0;
  for (let k = 0; k < n; k++) {
    if (!(d.ttftMs[k]! > lineMs)) continue;
    above++;
    members[classify(d, k, lineMs)].push(k);
    // The first-free wait plus the prefill with the best hit, but never under the TTFT
    // bound (the best hit may not be computed yet). Not first-free wait + bound: the
    // bound already holds a wait, the holder's, so that counts waiting twice.
    const onFirstFree = Math.max(d.firstFreeWaitMs[k]! + d.prefillBoundMs[k]!, d.boundMs[k]!);
    if (onFirstFree > lineMs) aboveOnFirstFree++;
  }
  const stats = (ks: readonly number[]): TailClassStats => ({
    count: ks.length,
    promptTokens: range(ks.map((k) => d.inputTokens[k]!)),
    hitTokens: range(ks.map((k) => d.hitTokens[k]!)),
    waitMs: range(ks.map((k) => d.waitMs[k]!)),
    prefillMs: range(ks.map((k) => d.prefillMs[k]!)),
  });
  const classes = Object.fromEntries(TAIL_CLASSES.map((c) => [c, stats(members[c])])) as Record<
    TailClass,
    TailClassStats
  >;
  const allowance = p99Allowance(n);
  const forced = members.forced.length;
  const late = overlapLate(d.arrivalMs, d.prefillBoundMs, d.boundMs, lineMs, d.workers);
  const p99Ms = percentile(Float64Array.from(d.ttftMs).sort(), 99);
  return {
    policy,
    factor,
    referenceP99Ms,
    lineMs,
    requests: n,
    referenceRequests: referenceServed === null ? null : referenceServed.length,
    droppedServedByReference: referenceServed === null ? null : droppedOf(referenceServed, d.index),
    allowance,
    p99Ms,
    above,
    met: n > 0 && Number.isFinite(p99Ms) && above <= allowance,
    forced,
    overlapLate: late,
    p99FloorMs: percentile(Float64Array.from(d.boundMs).sort(), 99),
    unreachable:
      forced + late > allowance &&
      d.hitAboveBest === 0 &&
      d.ttftBelowBound === 0 &&
      above >= forced + late,
    room: allowance - forced - late,
    classes,
    aboveOnFirstFree,
    hitAboveBest: d.hitAboveBest,
    ttftBelowBound: d.ttftBelowBound,
    fewerAboveThanProven: above < forced + late,
  };
}

/** The requests above the line, one record each, in trace order (`--tail-requests`). */
export function tailRequests(policy: string, d: TailData, lineMs: number): object[] {
  const out: object[] = [];
  const ms = (x: number) => Math.round(x * 10) / 10;
  for (let k = 0; k < d.ttftMs.length; k++) {
    if (!(d.ttftMs[k]! > lineMs)) continue;
    out.push({
      policy,
      index: d.index[k],
      cause: classify(d, k, lineMs),
      worker: d.worker[k],
      promptTokens: d.inputTokens[k],
      hitTokens: d.hitTokens[k],
      bestHitTokens: d.bestHitTokens[k],
      ttftMs: ms(d.ttftMs[k]!),
      waitMs: ms(d.waitMs[k]!),
      prefillMs: ms(d.prefillMs[k]!),
      boundMs: ms(d.boundMs[k]!),
      aheadIndex: d.aheadIndex[k],
      aheadMs: ms(d.aheadMs[k]!),
      busyAheadMs: ms(d.busyAheadMs[k]!),
      firstFreeWaitMs: ms(d.firstFreeWaitMs[k]!),
    });
  }
  return out;
}

const s = (ms: number) => (ms / 1000).toFixed(2);
const int = (x: number) => x.toLocaleString("en-US");
const LABELS: Record<TailClass, string> = {
  forced: "forced: above the line under any router",
  ownPrefill: "own prefill above the line (it got less cache than the best)",
  headOfLine: "head-of-line: behind the prefill in progress",
  backlog: "backlog: behind prefills queued ahead",
  slots: "slots/KV: waited with its worker's prefill idle",
};

/** The report as text for people. */
export function formatTailReport(r: TailReport): string {
  const out = [
    `tail report, ${r.policy}: goal p99 ≤ ${r.factor} × the reference's p99 = ${r.factor} × ${s(r.referenceP99Ms)} s = ${s(r.lineMs)} s`,
    `  ${int(r.requests)} requests: the p99 allows ${r.allowance} above the line; ${r.policy} has ${r.above} above (p99 ${s(r.p99Ms)} s = ${(r.p99Ms / r.referenceP99Ms).toFixed(2)} × the reference's): goal ${r.met ? "met" : "not met"}${r.requests === 0 ? " (it served no request)" : ""}`,
  ];
  if (r.referenceRequests !== null && r.droppedServedByReference !== null) {
    out.push(
      `  the reference served ${int(r.referenceRequests)}; ${r.policy} dropped ${int(r.droppedServedByReference)} of them${r.droppedServedByReference > 0 ? " (its p99 is over fewer requests than the reference's)" : ""}`,
    );
  }
  if (r.hitAboveBest > 0) {
    out.push(
      `  WARNING: ${r.hitAboveBest} requests hit more than the best possible prefix: the lower bound is wrong, nothing below is proven`,
    );
  }
  if (r.ttftBelowBound > 0 || r.fewerAboveThanProven) {
    out.push(
      `  WARNING: ${r.ttftBelowBound} requests' TTFT below their bound${r.fewerAboveThanProven ? ", and fewer above the line than forced + overlap" : ""}: a bound is wrong, nothing below is proven`,
    );
  }
  const proven =
    r.overlapLate > 0
      ? `forced ${r.forced} + overlap ${r.overlapLate} = ${r.forced + r.overlapLate}`
      : `forced ${r.forced}`;
  const checked = r.hitAboveBest === 0 && r.ttftBelowBound === 0 && !r.fewerAboveThanProven;
  out.push(
    `  p99 floor (p99 of the per-request bounds; ${checked ? "no router's p99 is lower, in the replay's model" : "not proven: the bound failed its check"}): ${s(r.p99FloorMs)} s = ${(r.p99FloorMs / r.referenceP99Ms).toFixed(2)} × the reference's`,
    `  overlap: of the rest, more would have to be in prefill at one instant than there are workers: ${r.overlapLate} more above the line under any router`,
    r.forced + r.overlapLate <= r.allowance
      ? `  ${proven} ≤ ${r.allowance} allowed: not proven unreachable; room for ${r.room} more above the line from every other cause`
      : r.unreachable
        ? `  ${proven} > ${r.allowance} allowed: no placement meets the goal (proof: each forced request's TTFT bound — its prefill with the longest prefix any earlier request left, after that request's own bound — is above the line${r.overlapLate > 0 ? "; the overlapping ones cannot all be in prefill at once" : ""}; in the replay's model: whole-prompt prefill, FIFO, one at a time per worker — not for an engine sharing blocks of a prompt still in chunked prefill)`
        : `  ${proven} > ${r.allowance} allowed, but the bound failed its check (above): nothing is proven about other placements`,
  );
  const rows = TAIL_CLASSES.map((c) => {
    const x = r.classes[c];
    const rg = (v: readonly [number, number] | null, f: (n: number) => string) =>
      v === null ? "-" : `${f(v[0])}–${f(v[1])}`;
    return [
      LABELS[c],
      String(x.count),
      rg(x.promptTokens, int),
      rg(x.hitTokens, int),
      rg(x.waitMs, s),
      rg(x.prefillMs, s),
    ];
  });
  const header = [
    "cause (first that applies)",
    "requests",
    "prompt tokens",
    "cached",
    "wait s",
    "prefill s",
  ];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: readonly string[]) =>
    `  ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ")}`;
  out.push(line(header), ...rows.map(line));
  out.push(
    `  above the line even on the worker that freed first, with the best possible cache (others as run): ${r.aboveOnFirstFree}`,
  );
  return `${out.join("\n")}\n`;
}
