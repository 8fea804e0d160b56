/**
 * `kvrouter replay`: replay a trace through the router and baselines in virtual time and
 * print the comparison (table, optional JSON line and SVG plot). See docs/replay.md.
 */

import { writeFileSync } from "node:fs";
import { infiniteCacheCeiling } from "./ceiling.js";
import { type CompareRun, comparePolicies } from "./compare.js";
import { parseReplayArgs, ReplayUsageError, USAGE } from "./options.js";
import { formatJson, formatTable, type ReportCeilings } from "./report.js";
import { comparePoliciesParallel } from "./run-parallel.js";
import { renderSvg } from "./svg-plot.js";
import { formatTailReport, type TailReport, tailReport, tailRequests } from "./tail-report.js";
import { loadTrace, TraceFormatError } from "./trace.js";

/**
 * Entry point; returns the exit code (0 ok, 1 failure — including an output file that
 * could not be written, after everything else is printed — 2 bad usage).
 */
export async function main(argv: string[]): Promise<number> {
  if (argv[0] === "matrix") {
    const { matrixMain } = await import("./matrix-main.js");
    return matrixMain(argv.slice(1));
  }
  let o: ReturnType<typeof parseReplayArgs>;
  try {
    o = parseReplayArgs(argv);
  } catch (err) {
    if (!(err instanceof ReplayUsageError)) throw err;
    process.stderr.write(`kvrouter replay: ${err.message}\n\n${USAGE}`);
    return 2;
  }
  if (o === null) {
    process.stdout.write(USAGE);
    return 0;
  }
  let requests: ReturnType<typeof loadTrace>;
  try {
    requests = loadTrace(o.trace, o.limit === null ? {} : { limit: o.limit });
  } catch (err) {
    const msg = err instanceof TraceFormatError ? err.message : (err as Error).message;
    process.stderr.write(`kvrouter replay: cannot read trace ${o.trace}: ${msg}\n`);
    return 1;
  }
  if (requests.length === 0) {
    process.stderr.write(`kvrouter replay: trace ${o.trace} has no requests\n`);
    return 1;
  }
  const ceilings: ReportCeilings = {
    single: infiniteCacheCeiling(requests, { blockSize: o.blockSize }),
    roundRobin: infiniteCacheCeiling(requests, { workers: o.workers, blockSize: o.blockSize }),
  };
  const cap =
    o.capacityBlocks === null
      ? "unlimited capacity"
      : `${o.capacityBlocks} blocks (${o.capacityBlocks * o.blockSize} tokens) per worker`;
  process.stderr.write(
    `replaying ${requests.length} requests on ${o.workers} workers, ${cap}, block size ${o.blockSize}\n`,
  );
  const rs = o.replicaSync;
  if (rs.replicas > 1) {
    const sync = rs.sync ? `on (delay p50 ${rs.syncP50Ms} ms, p99 ${rs.syncP99Ms} ms)` : "off";
    process.stderr.write(`kv runs as ${rs.replicas} router replicas, load sharing ${sync}\n`);
  }
  const progress = (r: CompareRun) => {
    process.stderr.write(
      `  ${r.label}: hit ${(100 * r.summary.hitRate).toFixed(1)}%, TTFT mean ${(r.summary.ttftMs.mean / 1000).toFixed(2)} s (${(r.wallMs / 1000).toFixed(1)} s)\n`,
    );
  };
  const started = performance.now();
  const runs =
    o.jobs > 1
      ? await comparePoliciesParallel(o.trace, o.limit, o, o.jobs, progress)
      : comparePolicies(requests, o, progress);
  process.stderr.write(`done in ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
  process.stdout.write(formatTable(runs, ceilings));
  for (const r of runs) {
    if (r.eventProblems !== undefined && Object.keys(r.eventProblems).length > 0) {
      process.stdout.write(
        `${r.label}: KV events not applied: ${JSON.stringify(r.eventProblems)}\n`,
      );
    }
    if (r.predict !== undefined) {
      process.stdout.write(`${r.label}: prediction/fallback: ${JSON.stringify(r.predict)}\n`);
    }
  }
  const tails = new Map<string, TailReport>();
  let failed = false; // an output file could not be written: exit 1 after the rest
  if (o.tail !== null) {
    const ref = runs.find((r) => r.label === "reference")!;
    const listed: object[] = [];
    const refServed = ref.tailData?.index ?? null;
    for (const r of runs) {
      if (r.tailData === undefined || r.label === "reference") continue;
      const t = tailReport(r.label, r.tailData, ref.summary.ttftMs.p99, o.tail.factor, refServed);
      tails.set(r.label, t);
      process.stdout.write(`\n${formatTailReport(t)}`);
      listed.push(...tailRequests(r.label, r.tailData, t.lineMs));
    }
    const file = o.tail.requestsFile ?? null;
    if (file !== null) {
      try {
        writeFileSync(file, listed.map((x) => `${JSON.stringify(x)}\n`).join(""));
        process.stderr.write(`${listed.length} requests above the line written to ${file}\n`);
      } catch (err) {
        // Checked at start-up; if the write still fails, say so and keep the rest.
        process.stderr.write(
          `kvrouter replay: cannot write --tail-requests ${file}: ${(err as Error).message}\n`,
        );
        failed = true;
      }
    }
  }
  if (o.svg !== null) {
    const title = `${requests.length} requests, ${o.workers} workers, ${cap}`;
    const series = runs.map((r) => ({
      label: r.label,
      ttftSorted: r.ttftSorted,
      hitRate: r.summary.hitRate,
    }));
    writeFileSync(o.svg, renderSvg(series, title, ceilings.single.tokenHitRate));
    process.stderr.write(`plot written to ${o.svg}\n`);
  }
  if (o.json) {
    const { scheduler, ...rest } = o;
    process.stdout.write(
      `${formatJson({
        options: { ...rest, requests: requests.length, scheduler },
        ceilings,
        runs: runs.map(({ ttftSorted: _t, tailData: _d, ...r }) =>
          tails.has(r.label) ? { ...r, tail: tails.get(r.label) } : r,
        ),
      })}\n`,
    );
  }
  return failed ? 1 : 0;
}
