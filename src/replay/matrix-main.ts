/**
 * `kvrouter replay matrix`: runs every policy on every workload at every load (each job
 * on a worker thread, `--jobs` at a time) and prints the tables of docs/replay.md.
 */

import { writeFileSync } from "node:fs";
import type { CompareJob } from "./compare.js";
import {
  cacheLabel,
  DEFAULT_MATRIX_CACHES,
  DEFAULT_MATRIX_POLICIES,
  formatMatrix,
  type MatrixJob,
  type MatrixResult,
  MatrixUsageError,
  runMatrixJob,
  splitMatrixArgs,
} from "./matrix.js";
import { renderMatrixSvg } from "./matrix-svg.js";
import { formatMatrixTail, matrixTailReports } from "./matrix-tail.js";
import { parseReplayArgs, ReplayUsageError, USAGE } from "./options.js";
import { formatJson } from "./report.js";
import { runLanes, runOnThread } from "./run-parallel.js";

export const MATRIX_USAGE = `usage: kvrouter replay matrix [--workloads a,b] [--loads 0.5,0.8,0.95]
                             [--caches unlimited,2000000] [--requests N] [replay options]

Runs each policy on each workload (conversation = the --trace file, default the shipped
slice; shared-prefix, chat, agentic, hot-prefix = generated with their defaults and
--seed) at each load (round-robin prefill utilisation, reached by scaling arrival times) with
each cache size, and prints one markdown table per workload and cache size plus kv
against the best peer per cell.
Default policies: kv, round_robin and every peer (--policy to choose); --reference adds
one worker with the fleet's capacity and throughput per cell (the hit-rate goal's
one-pool reference; the summary then shows kv's hit rate against it). --tail-report
(implies --reference; --tail-factor, --tail-policy as for replay) adds a table of the
p99 goal per cell: line, allowance, requests above, forced, causes, met or not.

  --workloads LIST   comma-separated (default: all five)
  --loads LIST       round-robin prefill utilisations (default 0.5,0.8,0.95)
  --caches LIST      KV cache per worker: 'unlimited' or tokens, comma-separated
                     (default unlimited,2000000; --capacity-tokens/--capacity-blocks
                     instead run that one size)
  --requests N       requests per workload (default 2000)
  --gen KEY=VALUE    a generator parameter for the generated workloads (e.g. prompts=4,
                     systemTokens=8192); repeatable; see kvrouter trace gen --help

Replay options (fleet, timing, scheduler, --jobs, --json, --svg FILE): see
kvrouter replay --help.
`;

export async function matrixMain(argv: string[]): Promise<number> {
  if (argv.includes("--help") || argv.includes("-h")) {
    process.stdout.write(MATRIX_USAGE);
    return 0;
  }
  let split: ReturnType<typeof splitMatrixArgs>;
  let o: NonNullable<ReturnType<typeof parseReplayArgs>>;
  try {
    split = splitMatrixArgs(argv);
    o = parseReplayArgs(split.rest)!;
    if (o.limit !== null) throw new MatrixUsageError("use --requests, not --limit, with matrix");
    if (split.caches !== null && o.capacityBlocks !== null) {
      throw new MatrixUsageError("give --caches or --capacity-tokens/--capacity-blocks, not both");
    }
    const sizes = (split.caches ?? []).filter((c) => c !== null);
    for (const c of sizes) {
      if (c % o.blockSize !== 0) {
        throw new MatrixUsageError(
          `--caches: ${c} tokens is not a whole number of ${o.blockSize}-token blocks`,
        );
      }
    }
    if (new Set(split.caches ?? []).size !== (split.caches ?? []).length) {
      throw new MatrixUsageError("--caches: a size is given twice");
    }
  } catch (err) {
    if (!(err instanceof MatrixUsageError) && !(err instanceof ReplayUsageError)) throw err;
    process.stderr.write(`kvrouter replay matrix: ${err.message}\n\n${MATRIX_USAGE}\n${USAGE}`);
    return 2;
  }
  const policies: CompareJob[] = [
    ...(split.rest.includes("--policy") ? o.policies : DEFAULT_MATRIX_POLICIES),
    ...(o.reference ? (["reference"] as const) : []),
  ];
  if ((o.tail?.requestsFile ?? null) !== null) {
    process.stderr.write("kvrouter replay matrix: --tail-requests is for kvrouter replay only\n");
    return 2;
  }
  const missing = (o.tail?.policies ?? []).filter((p) => !policies.includes(p as CompareJob));
  if (missing.length > 0) {
    process.stderr.write(
      `kvrouter replay matrix: --tail-policy: ${missing.join(", ")} not among the matrix's policies (${policies.join(", ")})\n`,
    );
    return 2;
  }
  const caches =
    split.caches ??
    (o.capacityBlocks === null ? DEFAULT_MATRIX_CACHES : [o.capacityBlocks * o.blockSize]);
  const jobs: MatrixJob[] = [];
  for (const workload of split.workloads) {
    for (const cacheTokens of caches) {
      for (const load of split.loads) {
        for (const policy of policies) {
          jobs.push({
            workload,
            load,
            policy,
            cacheTokens,
            requests: split.requests,
            trace: o.trace,
            gen: split.gen,
            options: o,
          });
        }
      }
    }
  }
  process.stderr.write(
    `matrix: ${split.workloads.length} workloads × ${split.loads.length} loads × ${caches.length} cache sizes × ${policies.length} policies = ${jobs.length} runs, ${o.jobs} threads\n`,
  );
  const started = performance.now();
  const onResult = (r: MatrixResult) =>
    process.stderr.write(
      `  ${r.workload} ${Math.round(100 * r.load)}% ${cacheLabel(r.cacheTokens)} ${r.policy}: hit ${(100 * r.summary.hitRate).toFixed(1)}%, TTFT ${(r.summary.ttftMs.mean / 1000).toFixed(2)} / p99 ${(r.summary.ttftMs.p99 / 1000).toFixed(2)} s (${(r.wallMs / 1000).toFixed(1)} s)\n`,
    );
  const results =
    o.jobs > 1
      ? await runLanes(
          jobs.length,
          o.jobs,
          (i) => runOnThread<MatrixResult>("matrix-worker", jobs[i], `${jobs[i]!.workload}`),
          onResult,
        )
      : jobs.map((j) => {
          const r = runMatrixJob(j);
          onResult(r);
          return r;
        });
  process.stderr.write(`done in ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
  process.stdout.write(formatMatrix(results));
  const tails = o.tail === null ? [] : matrixTailReports(results, o.tail.factor);
  if (tails.length > 0) process.stdout.write(`\n${formatMatrixTail(tails)}`);
  if (o.svg !== null) {
    writeFileSync(
      o.svg,
      renderMatrixSvg(results, `${o.workers} workers, ${split.requests} requests per workload`),
    );
    process.stderr.write(`plot written to ${o.svg}\n`);
  }
  if (o.json) {
    const { scheduler, ...rest } = o;
    process.stdout.write(
      `${formatJson({
        options: { ...rest, ...split, caches, rest: undefined, policies, scheduler },
        ceilings: null,
        runs: results.map(({ tailData: _d, ...r }) => {
          const t = tails.find(
            (x) =>
              x.workload === r.workload &&
              x.cacheTokens === r.cacheTokens &&
              x.load === r.load &&
              x.report.policy === r.policy,
          );
          return {
            label: `${r.workload}/${r.cacheTokens ?? "unlimited"}/${r.load}/${r.policy}`,
            ...r,
            ...(t === undefined ? {} : { tail: t.report }),
          };
        }),
      })}\n`,
    );
  }
  return 0;
}
