/**
 * `kvrouter replay matrix`: runs every policy on every workload at every load (each job
 * on a worker thread, `--jobs` at a time) and prints the tables of docs/replay.md.
 */

import { writeFileSync } from "node:fs";
import {
  DEFAULT_MATRIX_POLICIES,
  formatMatrix,
  type MatrixJob,
  type MatrixResult,
  MatrixUsageError,
  runMatrixJob,
  splitMatrixArgs,
} from "./matrix.js";
import { renderMatrixSvg } from "./matrix-svg.js";
import { parseReplayArgs, ReplayUsageError, USAGE } from "./options.js";
import { formatJson } from "./report.js";
import { runLanes, runOnThread } from "./run-parallel.js";

export const MATRIX_USAGE = `usage: kvrouter replay matrix [--workloads a,b] [--loads 0.5,0.8,0.95]
                             [--requests N] [replay options]

Runs each policy on each workload (conversation = the --trace file, default the shipped
slice; shared-prefix, chat, agentic, hot-prefix = generated with their defaults and
--seed) at each load (round-robin prefill utilisation, reached by scaling arrival times),
and prints one markdown table per workload plus kv against the best peer per cell.
Default policies: kv, round_robin and every peer (--policy to choose).

  --workloads LIST   comma-separated (default: all five)
  --loads LIST       round-robin prefill utilisations (default 0.5,0.8,0.95)
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
  } catch (err) {
    if (!(err instanceof MatrixUsageError) && !(err instanceof ReplayUsageError)) throw err;
    process.stderr.write(`kvrouter replay matrix: ${err.message}\n\n${MATRIX_USAGE}\n${USAGE}`);
    return 2;
  }
  const policies = split.rest.includes("--policy") ? o.policies : DEFAULT_MATRIX_POLICIES;
  const jobs: MatrixJob[] = [];
  for (const workload of split.workloads) {
    for (const load of split.loads) {
      for (const policy of policies) {
        jobs.push({
          workload,
          load,
          policy,
          requests: split.requests,
          trace: o.trace,
          gen: split.gen,
          options: o,
        });
      }
    }
  }
  process.stderr.write(
    `matrix: ${split.workloads.length} workloads × ${split.loads.length} loads × ${policies.length} policies = ${jobs.length} runs, ${o.jobs} threads\n`,
  );
  const started = performance.now();
  const onResult = (r: MatrixResult) =>
    process.stderr.write(
      `  ${r.workload} ${Math.round(100 * r.load)}% ${r.policy}: hit ${(100 * r.summary.hitRate).toFixed(1)}%, TTFT ${(r.summary.ttftMs.mean / 1000).toFixed(2)} / p99 ${(r.summary.ttftMs.p99 / 1000).toFixed(2)} s (${(r.wallMs / 1000).toFixed(1)} s)\n`,
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
  if (o.svg !== null) {
    const cap =
      o.capacityBlocks === null
        ? "unlimited caches"
        : `${o.capacityBlocks * o.blockSize} tokens per worker`;
    writeFileSync(
      o.svg,
      renderMatrixSvg(
        results,
        `${o.workers} workers, ${cap}, ${split.requests} requests per workload`,
      ),
    );
    process.stderr.write(`plot written to ${o.svg}\n`);
  }
  if (o.json) {
    const { scheduler, ...rest } = o;
    process.stdout.write(
      `${formatJson({ options: { ...rest, ...split, rest: undefined, policies, scheduler }, ceilings: null, runs: results.map((r) => ({ label: `${r.workload}/${r.load}/${r.policy}`, ...r, evictions: 0 })) })}\n`,
    );
  }
  return 0;
}
