/**
 * The replay's output: a fixed-width table for people and one JSON object for machines.
 */

import type { CeilingResult } from "./ceiling.js";
import type { RunSummary } from "./metrics.js";

/** One labelled run in a report. */
export interface ReportRun {
  /** Label in the table: the policy, or "reference". */
  readonly label: string;
  readonly summary: RunSummary;
  readonly evictions: number;
  readonly wallMs: number;
}

export interface ReportCeilings {
  /** One infinite cache (the best any router can do). */
  readonly single: CeilingResult;
  /** N infinite caches fed round-robin (cache-blind routing). */
  readonly roundRobin: CeilingResult;
}

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
const sec = (ms: number) => (Number.isNaN(ms) ? "-" : (ms / 1000).toFixed(2));

/** The runs as an aligned text table, plus the ceilings. */
export function formatTable(runs: readonly ReportRun[], ceilings: ReportCeilings | null): string {
  const header = [
    "policy",
    "hit rate",
    "prefill Mtok",
    "TTFT mean s",
    "p50 s",
    "p99 s",
    "E2E mean s",
    "imbalance",
    "prefill util",
    "evictions",
    "wall s",
  ];
  const rows = runs.map((r) => {
    const s = r.summary;
    return [
      r.label,
      pct(s.hitRate),
      (s.prefillTokens / 1e6).toFixed(2),
      sec(s.ttftMs.mean),
      sec(s.ttftMs.p50),
      sec(s.ttftMs.p99),
      sec(s.e2eMs.mean),
      s.loadImbalance.toFixed(3),
      pct(s.prefillUtilisation),
      String(r.evictions),
      (r.wallMs / 1000).toFixed(1),
    ];
  });
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: readonly string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
  const out = [line(header), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)];
  if (ceilings !== null) {
    const c = ceilings;
    out.push(
      "",
      `ceiling, one infinite cache:         ${pct(c.single.tokenHitRate)} of tokens (${pct(c.single.blockHitRate)} of 512-token trace blocks)`,
      `round-robin over infinite caches:    ${pct(c.roundRobin.tokenHitRate)} of tokens (${pct(c.roundRobin.blockHitRate)} of trace blocks)`,
    );
  }
  const rejected = runs.filter((r) => r.summary.rejected > 0);
  for (const r of rejected) {
    out.push(
      `${r.label}: ${r.summary.rejected} requests dropped (prompt larger than a worker's cache)`,
    );
  }
  return `${out.join("\n")}\n`;
}

/** The whole report as one JSON line (numbers rounded to keep it readable). */
export function formatJson(report: {
  readonly options: Record<string, unknown>;
  readonly ceilings: ReportCeilings | null;
  readonly runs: readonly ReportRun[];
}): string {
  return JSON.stringify(report, (_k, v: unknown) =>
    typeof v === "number" && !Number.isInteger(v) ? Math.round(v * 1e4) / 1e4 : v,
  );
}
