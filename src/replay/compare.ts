/**
 * Runs several policies (and optionally the single-big-worker reference) over the same
 * trace and fleet, one after the other, each from a cold start.
 */

import { RadixTreeIndex } from "../index/radix-tree.js";
import type { SchedulerConfig } from "../scheduler/types.js";
import { KvPolicy } from "./kv-policy.js";
import {
  type FleetView,
  LeastLoadedPolicy,
  type PolicyName,
  RandomPolicy,
  RoundRobinPolicy,
  type RoutingPolicy,
} from "./policies.js";
import type { ReportRun } from "./report.js";
import { deriveSeed, seededRng } from "./rng.js";
import { type FleetOptions, runReplay, unlimitedBlocks } from "./run-replay.js";
import type { TraceRequest } from "./trace.js";

export interface CompareOptions extends FleetOptions {
  readonly policies: readonly PolicyName[];
  readonly scheduler: SchedulerConfig;
  /** Also run one worker with the whole fleet's capacity, throughput and slots. */
  readonly reference: boolean;
}

/** Labelled run plus what the plot needs. */
export interface CompareRun extends ReportRun {
  readonly ttftSorted: Float64Array;
  /** kv only: index apply outcomes other than "applied". */
  readonly eventProblems?: Readonly<Record<string, number>>;
}

/** Build a policy by name for a fleet. */
export function makePolicy(
  name: PolicyName,
  fleet: FleetView,
  requests: readonly TraceRequest[],
  o: CompareOptions,
): RoutingPolicy {
  switch (name) {
    case "kv":
      return new KvPolicy({
        workers: fleet.size,
        index: new RadixTreeIndex({ blockSize: o.blockSize }),
        capacityBlocks: o.capacityBlocks ?? unlimitedBlocks(requests, o.blockSize),
        config: o.scheduler,
        rng: seededRng(deriveSeed(o.seed, "kv")),
      });
    case "round_robin":
      return new RoundRobinPolicy(fleet);
    case "random":
      return new RandomPolicy(fleet, seededRng(deriveSeed(o.seed, "random")));
    case "least_loaded":
      return new LeastLoadedPolicy(fleet);
    default: {
      const never: never = name;
      throw new Error(`unknown policy ${String(never)}`);
    }
  }
}

/** Run every requested policy; `onRun` sees each result as soon as it is ready. */
export function comparePolicies(
  requests: readonly TraceRequest[],
  o: CompareOptions,
  onRun: (run: CompareRun) => void = () => {},
): CompareRun[] {
  const runs: CompareRun[] = [];
  for (const name of o.policies) {
    let policy: RoutingPolicy | null = null;
    const r = runReplay(
      requests,
      (fleet) => {
        policy = makePolicy(name, fleet, requests, o);
        return policy;
      },
      o,
    );
    const p = policy as RoutingPolicy | null;
    const problems = p instanceof KvPolicy ? Object.fromEntries(p.eventProblems) : undefined;
    const run: CompareRun = {
      label: name,
      summary: r.summary,
      evictions: r.evictions,
      wallMs: r.wallMs,
      ttftSorted: r.ttftSorted,
      ...(problems === undefined ? {} : { eventProblems: problems }),
    };
    runs.push(run);
    onRun(run);
  }
  if (o.reference) {
    const n = o.workers;
    const r = runReplay(requests, (fleet) => new RoundRobinPolicy(fleet), {
      ...o,
      workers: 1,
      capacityBlocks: o.capacityBlocks === null ? null : o.capacityBlocks * n,
      timing: {
        ...o.timing,
        prefillTokensPerSec: o.timing.prefillTokensPerSec * n,
        maxNumSeqs: o.timing.maxNumSeqs * n,
      },
    });
    const run: CompareRun = {
      label: "reference",
      summary: r.summary,
      evictions: r.evictions,
      wallMs: r.wallMs,
      ttftSorted: r.ttftSorted,
    };
    runs.push(run);
    onRun(run);
  }
  return runs;
}
