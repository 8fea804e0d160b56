/**
 * The tail report of `kvrouter replay matrix --tail-report`: per cell (workload, cache
 * size, load) and reported policy, the goal line against the cell's one-pool reference,
 * the allowance, how many requests are above the line, how many no router could bring
 * under it, and the causes of the rest (`tail-report.ts`), as one markdown table.
 */

import type { MatrixResult } from "./matrix.js";
import { type TailReport, tailReport } from "./tail-report.js";

/** One reported run of a cell with its report. */
export interface MatrixTailRow {
  readonly workload: string;
  readonly cacheTokens: number | null;
  readonly load: number;
  readonly report: TailReport;
}

/** The reports of every run that carries tail figures, against its cell's reference. */
export function matrixTailReports(
  results: readonly MatrixResult[],
  factor: number,
): MatrixTailRow[] {
  const rows: MatrixTailRow[] = [];
  for (const r of results) {
    if (r.tailData === undefined || r.policy === "reference") continue;
    const ref = results.find(
      (x) =>
        x.policy === "reference" &&
        x.workload === r.workload &&
        x.cacheTokens === r.cacheTokens &&
        x.load === r.load,
    );
    if (ref === undefined) throw new Error(`no reference run for ${r.workload} at ${r.load}`);
    rows.push({
      workload: r.workload,
      cacheTokens: r.cacheTokens,
      load: r.load,
      report: tailReport(
        r.policy,
        r.tailData,
        ref.summary.ttftMs.p99,
        factor,
        ref.tailData?.index ?? null,
      ),
    });
  }
  return rows;
}

const sec = (ms: number) => (ms / 1000).toFixed(2);

/** One line per verdict: met, or not met and whether any router could meet it. */
export function verdict(t: TailReport): string {
  const dropped =
    (t.droppedServedByReference ?? 0) > 0
      ? `; dropped ${t.droppedServedByReference} the reference served`
      : "";
  if (t.met) return `met${dropped}`;
  if (t.requests === 0) return "not met (served no request)";
  if (t.hitAboveBest > 0 || t.ttftBelowBound > 0 || t.fewerAboveThanProven) {
    return `not met (bound failed its check)${dropped}`;
  }
  if (t.unreachable) {
    const why =
      t.overlapLate > 0 ? `forced ${t.forced} + overlap ${t.overlapLate}` : `forced ${t.forced}`;
    return `not met; unreachable (${why} > ${t.allowance})${dropped}`;
  }
  return `not met; not proven unreachable (room ${t.room})${dropped}`;
}

export function formatMatrixTail(rows: readonly MatrixTailRow[]): string {
  if (rows.length === 0) return "";
  const f = rows[0]!.report.factor;
  const out = [
    `### p99 against ${f} × the one-pool reference's p99 (tail report)`,
    "",
    `allowed: requests the p99 permits above the line; p99 floor: the p99 of the per-request lower bounds, below which no router's p99 can go; forced: requests above the line under any router (own prefill with the best possible cache, after the earliest the prompt holding that prefix can be computed); the other columns: the first cause that applies to the rest (docs/replay.md, "Where the p99 tail comes from"); first-free: above the line even on the worker that freed first with the best cache, not before its bound; goal: unreachable when forced + overlap (the requests that more than the workers would have to be in prefill at one instant) exceed allowed — proven in the replay's model (whole-prompt prefill, FIFO, one at a time per worker), not for an engine sharing blocks of a prompt still in chunked prefill.`,
    "",
    "| workload | caches | load | policy | reference p99 | line | p99 floor | p99 | allowed | above | forced | own prefill | head-of-line | backlog | slots/KV | first-free | goal |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
  ];
  for (const { workload, cacheTokens, load, report: t } of rows) {
    const c = t.classes;
    out.push(
      `| ${workload} | ${cacheTokens === null ? "unlimited" : cacheTokens.toLocaleString("en-US")} | ${Math.round(100 * load)} % | ${t.policy} | ${sec(t.referenceP99Ms)} | ${sec(t.lineMs)} | ${sec(t.p99FloorMs)} | ${sec(t.p99Ms)} | ${t.allowance} | ${t.above} | ${t.forced} | ${c.ownPrefill.count} | ${c.headOfLine.count} | ${c.backlog.count} | ${c.slots.count} | ${t.aboveOnFirstFree} | ${verdict(t)} |`,
    );
  }
  return `${out.join("\n")}\n`;
}
