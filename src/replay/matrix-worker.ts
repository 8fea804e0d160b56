/**
 * Worker-thread side of `kvrouter replay matrix`: builds one workload at one load level
 * and runs one policy on it (each job deterministic and independent), posts the figures.
 */

import { parentPort, workerData } from "node:worker_threads";
import { type MatrixJob, runMatrixJob } from "./matrix.js";

const result = runMatrixJob(workerData as MatrixJob);
parentPort!.postMessage(result);
