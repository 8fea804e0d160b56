/**
 * Runs a comparison's jobs on worker threads, a few at a time, so the four policies of a
 * full-trace replay use every core. Results come back in job order, identical to an
 * in-thread run (each job is deterministic and shares no state).
 */

import { Worker } from "node:worker_threads";
import { type CompareOptions, type CompareRun, compareJobs } from "./compare.js";
import type { PolicyWorkerInput } from "./policy-worker.js";

/** Spawn the job worker; from TypeScript sources (tsx, vitest) it registers tsx first. */
function spawn(input: PolicyWorkerInput): Worker {
  const fromSource = import.meta.url.endsWith(".ts");
  const file = new URL(fromSource ? "./policy-worker.ts" : "./policy-worker.js", import.meta.url);
  if (!fromSource) return new Worker(file, { workerData: input });
  const code = `import("tsx/esm/api").then((m) => { m.register(); return import(${JSON.stringify(file.href)}); })`;
  return new Worker(code, { eval: true, workerData: input });
}

function runInWorker(input: PolicyWorkerInput): Promise<CompareRun> {
  return new Promise((resolve, reject) => {
    const w = spawn(input);
    let result: CompareRun | null = null;
    w.once("message", (m: CompareRun) => {
      result = m;
    });
    w.once("error", reject);
    w.once("exit", (code) => {
      if (result !== null) resolve(result);
      else reject(new Error(`replay job ${input.job} exited with code ${code} and no result`));
    });
  });
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
  const results = new Array<CompareRun>(list.length);
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < list.length) {
      const i = next++;
      const run = await runInWorker({ trace, limit, job: list[i]!, options: o });
      results[i] = run;
      onRun(run);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(jobs, list.length)) }, lane));
  return results;
}
