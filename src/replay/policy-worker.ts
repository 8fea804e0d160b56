/**
 * Worker-thread side of a parallel comparison: loads the trace, runs one job, posts the
 * result back. Each job is independent (own fleet, caches, router), so threads share
 * nothing but the trace file.
 */

import { parentPort, workerData } from "node:worker_threads";
import { type CompareJob, type CompareOptions, runJob } from "./compare.js";
import { loadTrace } from "./trace.js";

/** What the parent sends. */
export interface PolicyWorkerInput {
  readonly trace: string;
  readonly limit: number | null;
  readonly job: CompareJob;
  readonly options: CompareOptions;
}

const input = workerData as PolicyWorkerInput;
const requests = loadTrace(input.trace, input.limit === null ? {} : { limit: input.limit });
const run = runJob(requests, input.job, input.options);
parentPort!.postMessage(run, [run.ttftSorted.buffer as ArrayBuffer]);
