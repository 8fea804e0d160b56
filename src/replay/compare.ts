/**
 * Runs several policies (and optionally the single-big-worker reference) over the same
 * trace and fleet, one after the other, each from a cold start.
 */

import { RadixTreeIndex } from "../index/radix-tree.js";
import type { SchedulerConfig } from "../scheduler/types.js";
import { deriveSeed, seededRng } from "../util/rng.js";
import { EarliestFirstTokenPolicy } from "./earliest-first-token.js";
import { KvPolicy } from "./kv-policy.js";
import { type KvPredictOptions, type KvPredictStats, SERVICE_PREDICT } from "./kv-predict.js";
import { AibrixPrefixCachePolicy } from "./peers/aibrix-prefix-cache.js";
import { DynamoKvPolicy } from "./peers/dynamo-kv-router.js";
import { LlmdApproxPolicy, LlmdPrecisePolicy } from "./peers/llmd-scorers.js";
import { ProductionStackKvawarePolicy } from "./peers/production-stack-kvaware.js";
import { SglangCacheAwarePolicy } from "./peers/sglang-cache-aware.js";
import {
  type FleetView,
  LeastLoadedPolicy,
  type PolicyName,
  RandomPolicy,
  RoundRobinPolicy,
  type RoutingPolicy,
} from "./policies.js";
import { type ReplicaSyncModel, ReplicatedKvPolicy } from "./replica-policy.js";
import type { ReportRun } from "./report.js";
import { type FleetOptions, runReplay, unlimitedBlocks } from "./run-replay.js";
import type { TailData } from "./tail-data.js";
import type { TailOptions } from "./tail-report.js";
import type { TraceRequest } from "./trace.js";

export interface CompareOptions extends FleetOptions {
  readonly policies: readonly PolicyName[];
  readonly scheduler: SchedulerConfig;
  /** Also run one worker with the whole fleet's capacity, throughput and slots. */
  readonly reference: boolean;
  /**
   * kv only: predict-on-route, fallback and injected faults; absent = the service's
   * default (`SERVICE_PREDICT`). `kv_nopredict` takes the same with the TTL at 0.
   */
  readonly predict?: KvPredictOptions;
  /** kv only: more than one replica runs `ReplicatedKvPolicy`; absent = one router. */
  readonly replicaSync?: ReplicaSyncModel;
  /** `--tail-report`: the policies whose per-request tail figures are collected. */
  readonly tail?: TailOptions | null;
}

/** Labelled run plus what the plot needs. */
export interface CompareRun extends ReportRun {
  readonly ttftSorted: Float64Array;
  /** kv only: index apply outcomes other than "applied". */
  readonly eventProblems?: Readonly<Record<string, number>>;
  /** kv with prediction, fallback or faults: what they did (kv-predict.ts). */
  readonly predict?: KvPredictStats;
  /**
   * Per-request tail figures (`--tail-report`, this policy among `tail.policies`; the
   * reference carries them too, for the trace indices it served).
   */
  readonly tailData?: TailData;
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
    case "kv_nopredict":
    case "kv_rate": {
      if (o.replicaSync !== undefined && o.replicaSync.replicas > 1) {
        return new ReplicatedKvPolicy({
          ...o.replicaSync,
          workers: fleet.size,
          blockSize: o.blockSize,
          capacityBlocks: o.capacityBlocks ?? unlimitedBlocks(requests, o.blockSize),
          config: o.scheduler,
          seed: o.seed,
        });
      }
      return new KvPolicy({
        workers: fleet.size,
        index: new RadixTreeIndex({ blockSize: o.blockSize }),
        capacityBlocks: o.capacityBlocks ?? unlimitedBlocks(requests, o.blockSize),
        config: name === "kv_rate" ? rateConfig(o) : o.scheduler,
        rng: seededRng(deriveSeed(o.seed, "kv")),
        predict:
          name === "kv_nopredict"
            ? { ...(o.predict ?? SERVICE_PREDICT), ttlMs: 0 }
            : (o.predict ?? SERVICE_PREDICT),
        ...(name === "kv_rate"
          ? {
              prefill: {
                tokensPerSec: o.timing.prefillTokensPerSec,
                overheadMs: o.timing.prefillOverheadMs,
              },
            }
          : {}),
      });
    }
    case "round_robin":
      return new RoundRobinPolicy(fleet);
    case "random":
      return new RandomPolicy(fleet, seededRng(deriveSeed(o.seed, "random")));
    case "least_loaded":
      return new LeastLoadedPolicy(fleet);
    case "earliest_first_token":
      return new EarliestFirstTokenPolicy(fleet.size, o.timing, o.blockSize);
    case "sglang_cache_aware":
      return new SglangCacheAwarePolicy(fleet, o.blockSize);
    case "llmd_precise":
      return new LlmdPrecisePolicy(fleet, o.blockSize, seededRng(deriveSeed(o.seed, name)));
    case "llmd_approx":
      return new LlmdApproxPolicy(fleet, o.blockSize, seededRng(deriveSeed(o.seed, name)));
    case "dynamo_kv":
      return new DynamoKvPolicy(fleet, o.blockSize, seededRng(deriveSeed(o.seed, name)));
    case "aibrix_prefix_cache":
      return new AibrixPrefixCachePolicy(fleet, o.blockSize, seededRng(deriveSeed(o.seed, name)));
    case "pstack_kvaware":
      return new ProductionStackKvawarePolicy(fleet, o.blockSize);
    default: {
      const never: never = name;
      throw new Error(`unknown policy ${String(never)}`);
    }
  }
}

/**
 * `kv_rate`'s scheduler: the run's, with the queue weight set to what one waiting request
 * costs a worker besides its tokens — the per-request prefill overhead, in blocks at the
 * prefill rate (20 ms at 5,200 tokens/s in 16-token blocks: 6.5) — as an operator would
 * set `scheduler.weights.queue` from the engine's measured overhead and rate.
 */
export function rateConfig(o: Pick<CompareOptions, "scheduler" | "timing" | "blockSize">) {
  const queue = (o.timing.prefillOverheadMs * o.timing.prefillTokensPerSec) / 1000 / o.blockSize;
  return { ...o.scheduler, weights: { ...o.scheduler.weights, queue } };
}

/** One run of a comparison: a policy, or the single-big-worker reference. */
export type CompareJob = PolicyName | "reference";

/** The jobs `o` asks for, in report order. */
export function compareJobs(o: Pick<CompareOptions, "policies" | "reference">): CompareJob[] {
  return o.reference ? [...o.policies, "reference"] : [...o.policies];
}

/** Run one job from a cold start. */
export function runJob(
  requests: readonly TraceRequest[],
  job: CompareJob,
  o: CompareOptions,
): CompareRun {
  if (job === "reference") {
    const n = o.workers;
    const r = runReplay(
      requests,
      (fleet) => new RoundRobinPolicy(fleet),
      {
        ...o,
        workers: 1,
        capacityBlocks: o.capacityBlocks === null ? null : o.capacityBlocks * n,
        // n times one worker in every dimension: n workers pay the per-request overhead
        // n at a time, so the pool pays 1/n of it per request (with the whole overhead it
        // could start at most 1 / overhead requests a second, the fleet n / overhead, and on
        // many short prompts it queued where the fleet did not).
        timing: {
          ...o.timing,
          prefillTokensPerSec: o.timing.prefillTokensPerSec * n,
          prefillOverheadMs: o.timing.prefillOverheadMs / n,
          maxNumSeqs: o.timing.maxNumSeqs * n,
        },
      },
      // The tail report counts the requests a policy dropped that the reference served.
      { tail: (o.tail ?? null) !== null },
    );
    return {
      label: "reference",
      summary: r.summary,
      evictions: r.evictions,
      wallMs: r.wallMs,
      ttftSorted: r.ttftSorted,
      ...(r.tail === undefined ? {} : { tailData: r.tail }),
    };
  }
  let policy: RoutingPolicy | null = null;
  const r = runReplay(
    requests,
    (fleet) => {
      policy = makePolicy(job, fleet, requests, o);
      return policy;
    },
    o,
    { tail: o.tail?.policies.includes(job) ?? false },
  );
  const p = policy as RoutingPolicy | null;
  const problems =
    p instanceof KvPolicy || p instanceof ReplicatedKvPolicy
      ? Object.fromEntries(p.eventProblems)
      : undefined;
  const predict = p instanceof KvPolicy ? p.predict?.stats : undefined;
  return {
    label: job,
    summary: r.summary,
    evictions: r.evictions,
    wallMs: r.wallMs,
    ttftSorted: r.ttftSorted,
    ...(problems === undefined ? {} : { eventProblems: problems }),
    ...(predict === undefined ? {} : { predict: { ...predict } }),
    ...(r.tail === undefined ? {} : { tailData: r.tail }),
  };
}

/** Run every requested job in this thread, in order; `onRun` sees each result when ready. */
export function comparePolicies(
  requests: readonly TraceRequest[],
  o: CompareOptions,
  onRun: (run: CompareRun) => void = () => {},
): CompareRun[] {
  return compareJobs(o).map((job) => {
    const run = runJob(requests, job, o);
    onRun(run);
    return run;
  });
}
