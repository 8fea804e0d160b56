/**
 * The workloads of `kvrouter replay matrix` and their load levels. A workload is a name
 * that builds the same requests in any thread (the shipped conversation slice, or a
 * generator with its defaults and a seed); a load level is the round-robin prefill
 * utilisation it is stretched or squeezed to, by scaling every arrival time by one
 * factor. Round-robin's prefill work does not depend on timing (its hits are what N
 * infinite private caches fed in turn would hit), so the factor is computed, not searched:
 * utilisation = busy time / (workers × span).
 */

import { infiniteCacheCeiling } from "./ceiling.js";
import { prefillMs, type TimingModel } from "./timing-model.js";
import { loadTrace, parseTrace, type TraceRequest } from "./trace.js";
import {
  defaultParams,
  generateWorkload,
  isWorkloadKind,
  toJsonl,
  WORKLOAD_KINDS,
  type WorkloadParams,
} from "./workloads/generators.js";

export const MATRIX_WORKLOADS = ["conversation", ...WORKLOAD_KINDS] as const;
export type MatrixWorkload = (typeof MATRIX_WORKLOADS)[number];

export function isMatrixWorkload(s: string): s is MatrixWorkload {
  return (MATRIX_WORKLOADS as readonly string[]).includes(s);
}

/** The requests of a workload: `conversation` reads `trace`, the others are generated. */
export function buildWorkload(
  name: MatrixWorkload,
  o: {
    readonly requests: number;
    readonly seed: number;
    readonly trace: string;
    /** Generator parameters replacing the kind's defaults. */
    readonly gen?: Partial<WorkloadParams>;
  },
): TraceRequest[] {
  if (name === "conversation") return loadTrace(o.trace, { limit: o.requests });
  if (!isWorkloadKind(name)) throw new Error(`unknown workload ${name}`);
  const lines = generateWorkload(name, {
    ...defaultParams(name),
    ...o.gen,
    requests: o.requests,
    seed: o.seed,
  });
  return parseTrace(toJsonl(lines));
}

/** Round-robin's prefill busy time over the whole trace, summed over workers, ms. */
export function roundRobinBusyMs(
  requests: readonly TraceRequest[],
  workers: number,
  blockSize: number,
  timing: TimingModel,
): number {
  let busy = 0;
  for (const r of requests) busy += prefillMs(timing, r.inputLength);
  // Round-robin's hits are those of N infinite private caches fed in turn.
  const rr = infiniteCacheCeiling(requests, { workers, blockSize });
  return busy - (rr.tokenHits / timing.prefillTokensPerSec) * 1000;
}

/** `requests` with arrival times scaled so round-robin runs at `utilisation`. */
export function scaleToLoad(
  requests: readonly TraceRequest[],
  utilisation: number,
  workers: number,
  blockSize: number,
  timing: TimingModel,
): { requests: TraceRequest[]; factor: number } {
  const span = requests.at(-1)!.arrivalMs - requests[0]!.arrivalMs;
  const busy = roundRobinBusyMs(requests, workers, blockSize, timing);
  const wanted = busy / (workers * utilisation);
  const factor = span > 0 ? wanted / span : 1;
  const t0 = requests[0]!.arrivalMs;
  return {
    factor,
    requests: requests.map((r) => ({ ...r, arrivalMs: (r.arrivalMs - t0) * factor })),
  };
}
