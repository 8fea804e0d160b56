/**
 * Runs a comparison's jobs on worker threads, a few at a time, so the four policies of a
 * full-trace replay use every core. Results come back in job order, identical to an
 * in-thread run (each job is deterministic and shares no state).
 */

import { Worker } from "node:worker_threads";
import { type CompareOptions, type CompareRun, compareJobs } from "./compare.js";
import type { PolicyWorkerInput } from "./policy-worker.js";

/**
 * Spawn worker module `name` (a sibling of this file, without extension) on a thread;
 * from TypeScript sources (tsx, vitest) it registers tsx first.
 */
function spawn(name: string, input: unknown): Worker {
  const fromSource = import.meta.url.endsWith(".ts");
  const file = new URL(`./${name}${fromSource ? ".ts" : ".js"}`, import.meta.url);
  if (!fromSource) return new Worker(file, { workerData: input });
  const code = `import("tsx/esm/api").then((m) => { m.register(); return import(${JSON.stringify(file.href)}); })`;
  return new Worker(code, { eval: true, workerData: input });
}

/** Run worker module `name` on a thread with `input`; resolves with the one message it posts. */
export function runOnThread<O>(name: string, input: unknown, label: string): Promise<O> {
  return new Promise((resolve, reject) => {
    const w = spawn(name, input);
    let result: O | null = null;
    w.once("message", (m: O) => {
      result = m;
    });
    w.once("error", reject);
    w.once("exit", (code) => {
      if (result !== null) resolve(result);
      else reject(new Error(`replay job ${label} exited with code ${code} and no result`));
    });
  });
}

function runInWorker(input: PolicyWorkerInput): Promise<CompareRun> {
  return runOnThread<CompareRun>("policy-worker", input, String(input.job));
}

/** Run `count` jobs on up to `lanes` threads; `run(i)` starts job i; results in job order. */
export async function runLanes<O>(
  count: number,
  lanes: number,
  run: (i: number) => Promise<O>,
  onResult: (o: O, i: number) => void = () => {},
): Promise<O[]> {
  const results = new Array<O>(count);
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < count) {
      const i = next++;
      results[i] = await run(i);
      onResult(results[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(lanes, count)) }, lane));
  return results;
}

/**
 * Run the jobs of `o` on up to `jobs` threads. The trace is read by each thread from
 * `trace` (first `limit` requests).
 */
export async function comparePoliciesParallel(
  trace: string,
  limit: number | null,
  o: CompareOptions,
  jobs: number,
  onRun: (run: CompareRun) => void = () => {},
): Promise<CompareRun[]> {
  const list = compareJobs(o);
  return runLanes(
    list.length,
    jobs,
    (i) => runInWorker({ trace, limit, job: list[i]!, options: o }),
    (run) => onRun(run),
  );
}
