/**
 * `kvrouter replay` flags, parsed and checked once; a bad flag is an error naming it.
 */

import { availableParallelism } from "node:os";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { FIELDS } from "../config/fields.js";
import { resolveSchedulerConfig, SchedulerConfigError } from "../scheduler/config.js";
import type { CostWeights, SchedulerConfig } from "../scheduler/types.js";
import { type KvPredictOptions, parseFault } from "./kv-predict.js";
import {
  BASELINE_POLICY_NAMES,
  isPolicyName,
  PEER_POLICY_NAMES,
  POLICY_NAMES,
  type PolicyName,
  VARIANT_POLICY_NAMES,
} from "./policies.js";
import { parseReplicaFlags, REPLICA_FLAGS, REPLICA_USAGE } from "./replica-options.js";
import type { ReplicaSyncModel } from "./replica-policy.js";
import { parseTailFlags, TAIL_FLAGS, TAIL_USAGE } from "./tail-options.js";
import type { TailOptions } from "./tail-report.js";
import { DEFAULT_TIMING, invalidTimingField, type TimingModel } from "./timing-model.js";

/** The trace slice shipped in the repository (and the image): `traces/README.md`. */
export const DEFAULT_TRACE = fileURLToPath(
  new URL("../../traces/mooncake-conversation-2k.jsonl", import.meta.url),
);

export const USAGE = `usage: kvrouter replay [--trace FILE] [options]

Replays a request trace (Mooncake JSONL) through the router in virtual time against a
simulated fleet of vLLM-like workers, and compares routing policies.

  --trace FILE              trace file (default: traces/mooncake-conversation-2k.jsonl,
                            2,000 requests of the Mooncake conversation trace)
  --limit N                 only the first N requests of the file
  --workers N               workers in the fleet (default 8)
  --capacity-blocks C       KV blocks per worker (default: unlimited)
  --capacity-tokens T       KV capacity per worker in tokens (rounded down to blocks)
  --policy P                ${BASELINE_POLICY_NAMES.join(" | ")} |
                            ${PEER_POLICY_NAMES.join(" | ")} |
                            baselines | peers | all (default all); repeatable;
                            also kv_nopredict: kv without predict-on-route, kv_rate:
                            kv told the workers' prefill rate and overhead
                            (inFlight.prefillTokensPerSec, prefillOverheadMs; queue
                            weight = the overhead in blocks), and
                            earliest_first_token: each request where its first token
                            comes soonest, from the fleet's exact state (a yardstick)
  --reference               also run one worker holding the whole fleet's capacity and
                            throughput (the hit rate routing should approach)
  --block-size B            tokens per KV block, engine and router (default 16)
  --seed S                  seed of random routing, sampling and engine hashes (default 1)
  --prefill-tokens-per-s X  uncached prompt tokens per second per worker, as in
                            kvrouter sim-worker (default ${DEFAULT_TIMING.prefillTokensPerSec});
                            --prefill-tps is the old spelling
  --prefill-overhead-ms X   fixed time per prefill (default ${DEFAULT_TIMING.prefillOverheadMs})
  --decode-ms-per-token X   time per output token (default ${DEFAULT_TIMING.decodeMsPerToken})
  --max-num-seqs N          running requests per worker (default ${DEFAULT_TIMING.maxNumSeqs})
  --event-delay-ms X        KV event propagation delay, engine to router (default 5)
  --scrape-interval-ms X    /metrics scrape period seen by the router, 0 = none (default 1000)
  --predict-ttl-ms X        kv: predict-on-route, routed blocks count as held for X ms
                            (docs/prediction.md; default ${FIELDS.predict.ttlMs.default}, the service's; 0 = off;
                            --policy kv_nopredict runs kv with 0 beside it; not
                            modelled with --replicas above 1)
  --fallback                kv: route a worker whose stream broke by its approximate view
  --fault KIND:W@S          inject a stream fault for kv: gap (1 s of batches lost, no
                            replay) or silent (publisher stops) on worker W at S seconds;
                            repeatable
${REPLICA_USAGE}  --weight KEY=VALUE        scheduler weight override (prefill, pending, decode, queue, host,
                            disk, store); repeatable
  --temperature T           scheduler temperature (default: the service default)
  --outlier-std-k K         exclude workers with KV load above mean + K·std; inf = off
  --kv-hard-cap X           exclude workers with KV load above X (0..1); inf = off
${TAIL_USAGE}  --jobs N                  policies run in parallel on worker threads (default: cores)
  --json                    print one JSON object as the last line
  --svg FILE                write the TTFT CDF and hit-rate plot
  --help                    this text
`;

export interface ReplayOptions {
  readonly trace: string;
  readonly limit: number | null;
  readonly workers: number;
  /** KV blocks per worker; null = unlimited. */
  readonly capacityBlocks: number | null;
  readonly policies: readonly PolicyName[];
  readonly reference: boolean;
  readonly blockSize: number;
  readonly seed: number;
  readonly timing: TimingModel;
  readonly eventDelayMs: number;
  readonly scrapeIntervalMs: number;
  /** kv only: predict-on-route, fallback and injected faults (kv-predict.ts). */
  readonly predict: KvPredictOptions;
  /** kv only: router replicas and how they share load (replica-policy.ts). */
  readonly replicaSync: ReplicaSyncModel;
  readonly scheduler: SchedulerConfig;
  /** `--tail-report`: null = off. */
  readonly tail: TailOptions | null;
  readonly jobs: number;
  readonly json: boolean;
  readonly svg: string | null;
}

/** A bad command line; the message names the flag. */
export class ReplayUsageError extends Error {
  override name = "ReplayUsageError";
}

function num(
  flag: string,
  v: string | undefined,
  ok: (x: number) => boolean,
  what: string,
): number | undefined {
  if (v === undefined) return undefined;
  const x = Number(v);
  if (v.trim() === "" || !Number.isFinite(x) || !ok(x)) {
    throw new ReplayUsageError(`--${flag} must be ${what}, got '${v}'`);
  }
  return x;
}
function numOrInf(
  flag: string,
  v: string | undefined,
  ok: (x: number) => boolean,
  what: string,
): number | undefined {
  if (v !== undefined && /^(inf|infinity)$/i.test(v.trim())) return Number.POSITIVE_INFINITY;
  return num(flag, v, ok, what);
}
/** `--prefill-tokens-per-s`, or its old spelling `--prefill-tps` (not both). */
function prefillRate(v: string | undefined, old: string | undefined): number | undefined {
  if (v !== undefined && old !== undefined) {
    throw new ReplayUsageError(
      "give --prefill-tokens-per-s or its old spelling --prefill-tps, not both",
    );
  }
  if (old !== undefined) return num("prefill-tps", old, (x) => x > 0, "a number > 0");
  return num("prefill-tokens-per-s", v, (x) => x > 0, "a number > 0");
}
const posInt = (x: number) => Number.isSafeInteger(x) && x > 0;
const nonNeg = (x: number) => x >= 0;

/** Parse argv; returns null when `--help` was asked. Throws `ReplayUsageError`. */
export function parseReplayArgs(argv: readonly string[]): ReplayOptions | null {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (err) {
    throw new ReplayUsageError((err as Error).message);
  }
  const v = parsed.values;
  if (v.help) return null;
  if (parsed.positionals.length > 0) {
    throw new ReplayUsageError(`unexpected argument '${parsed.positionals[0]}'`);
  }
  const blockSize = num("block-size", v["block-size"], posInt, "a positive integer") ?? 16;
  const blocks = num("capacity-blocks", v["capacity-blocks"], posInt, "a positive integer");
  const tokens = num("capacity-tokens", v["capacity-tokens"], posInt, "a positive integer");
  if (blocks !== undefined && tokens !== undefined) {
    throw new ReplayUsageError("give --capacity-blocks or --capacity-tokens, not both");
  }
  let capacityBlocks: number | null =
    blocks ?? (tokens === undefined ? null : Math.floor(tokens / blockSize));
  if (capacityBlocks === 0) throw new ReplayUsageError("--capacity-tokens is less than one block");
  if (capacityBlocks !== null && capacityBlocks < 1) capacityBlocks = null;

  const policies: PolicyName[] = [];
  for (const p of v.policy ?? ["all"]) {
    if (p === "all") policies.push(...POLICY_NAMES);
    else if (p === "peers") policies.push(...PEER_POLICY_NAMES);
    else if (p === "baselines") policies.push(...BASELINE_POLICY_NAMES);
    else if (isPolicyName(p)) policies.push(p);
    else
      throw new ReplayUsageError(
        `--policy must be one of ${[...POLICY_NAMES, ...VARIANT_POLICY_NAMES].join(", ")}, baselines, peers, all; got '${p}'`,
      );
  }

  const timing: TimingModel = {
    prefillTokensPerSec:
      prefillRate(v["prefill-tokens-per-s"], v["prefill-tps"]) ??
      DEFAULT_TIMING.prefillTokensPerSec,
    prefillOverheadMs:
      num("prefill-overhead-ms", v["prefill-overhead-ms"], nonNeg, "a number ≥ 0") ??
      DEFAULT_TIMING.prefillOverheadMs,
    decodeMsPerToken:
      num("decode-ms-per-token", v["decode-ms-per-token"], nonNeg, "a number ≥ 0") ??
      DEFAULT_TIMING.decodeMsPerToken,
    maxNumSeqs:
      num("max-num-seqs", v["max-num-seqs"], posInt, "a positive integer") ??
      DEFAULT_TIMING.maxNumSeqs,
  };
  const bad = invalidTimingField(timing);
  if (bad !== null) throw new ReplayUsageError(`timing model: ${bad} is invalid`);

  const weights: Record<string, number> = {};
  for (const kv of v.weight ?? []) {
    const m = /^([a-z]+)=(.+)$/.exec(kv);
    if (m === null) throw new ReplayUsageError(`--weight must look like KEY=VALUE, got '${kv}'`);
    weights[m[1]!] = Number(m[2]);
  }
  let scheduler: SchedulerConfig;
  try {
    const temperature = num("temperature", v.temperature, nonNeg, "a number ≥ 0");
    const outlierStdK = numOrInf(
      "outlier-std-k",
      v["outlier-std-k"],
      nonNeg,
      "a number ≥ 0 or inf",
    );
    const kvHardCap = numOrInf(
      "kv-hard-cap",
      v["kv-hard-cap"],
      (x) => x > 0,
      "a number > 0 or inf",
    );
    scheduler = resolveSchedulerConfig({
      weights: weights as Partial<CostWeights>,
      ...(temperature === undefined ? {} : { temperature }),
      ...(outlierStdK === undefined ? {} : { outlierStdK }),
      ...(kvHardCap === undefined ? {} : { kvHardCap }),
    });
    for (const k of Object.keys(weights)) {
      if (!(k in scheduler.weights)) throw new ReplayUsageError(`--weight: unknown weight '${k}'`);
    }
  } catch (err) {
    if (err instanceof SchedulerConfigError) throw new ReplayUsageError(`--weight: ${err.message}`);
    throw err;
  }

  const replicaSync = parseReplicaFlags(v);
  if (typeof replicaSync === "string") throw new ReplayUsageError(replicaSync);
  let predict = predictOptions(v, num("workers", v.workers, posInt, "a positive integer") ?? 8);
  // Replicas do not model prediction: with more than one, kv runs without it unless the
  // flags ask for it explicitly, which is refused.
  if (
    replicaSync.replicas > 1 &&
    ((v["predict-ttl-ms"] !== undefined && predict.ttlMs > 0) ||
      predict.fallback ||
      predict.faults.length > 0)
  ) {
    throw new ReplayUsageError(
      "--replicas above 1 does not model --predict-ttl-ms, --fallback or --fault yet",
    );
  }
  if (replicaSync.replicas > 1) predict = { ...predict, ttlMs: 0 };
  const tail = parseTailFlags(v, [...new Set(policies)]);
  if (typeof tail === "string") throw new ReplayUsageError(tail);
  return {
    trace: v.trace ?? DEFAULT_TRACE,
    limit: num("limit", v.limit, posInt, "a positive integer") ?? null,
    workers: num("workers", v.workers, posInt, "a positive integer") ?? 8,
    capacityBlocks,
    policies: [...new Set(policies)],
    reference: (v.reference ?? false) || tail !== null,
    blockSize,
    seed: num("seed", v.seed, Number.isSafeInteger, "an integer") ?? 1,
    timing,
    eventDelayMs: num("event-delay-ms", v["event-delay-ms"], nonNeg, "a number ≥ 0") ?? 5,
    scrapeIntervalMs:
      num("scrape-interval-ms", v["scrape-interval-ms"], nonNeg, "a number ≥ 0") ?? 1000,
    predict,
    replicaSync,
    scheduler,
    tail,
    jobs: num("jobs", v.jobs, posInt, "a positive integer") ?? availableParallelism(),
    json: v.json ?? false,
    svg: v.svg ?? null,
  };
}

function predictOptions(
  v: { "predict-ttl-ms"?: string; fallback?: boolean; fault?: string[] },
  workers: number,
): KvPredictOptions {
  const faults = (v.fault ?? []).map((f) => {
    const r = parseFault(f, workers);
    if (typeof r === "string") throw new ReplayUsageError(`--fault: ${r}`);
    return r;
  });
  return {
    ttlMs:
      num("predict-ttl-ms", v["predict-ttl-ms"], nonNeg, "a number ≥ 0") ??
      FIELDS.predict.ttlMs.default,
    fallback: v.fallback ?? false,
    faults,
    degradedTtlMs: FIELDS.predict.degradedTtlMs.default,
  };
}

function parse(argv: readonly string[]) {
  return parseArgs({
    args: [...argv],
    allowPositionals: true,
    strict: true,
    options: {
      trace: { type: "string" },
      limit: { type: "string" },
      workers: { type: "string" },
      "capacity-blocks": { type: "string" },
      "capacity-tokens": { type: "string" },
      policy: { type: "string", multiple: true },
      reference: { type: "boolean" },
      "block-size": { type: "string" },
      seed: { type: "string" },
      "prefill-tokens-per-s": { type: "string" },
      "prefill-tps": { type: "string" },
      "prefill-overhead-ms": { type: "string" },
      "decode-ms-per-token": { type: "string" },
      "max-num-seqs": { type: "string" },
      "event-delay-ms": { type: "string" },
      "scrape-interval-ms": { type: "string" },
      "predict-ttl-ms": { type: "string" },
      fallback: { type: "boolean" },
      fault: { type: "string", multiple: true },
      weight: { type: "string", multiple: true },
      temperature: { type: "string" },
      "outlier-std-k": { type: "string" },
      "kv-hard-cap": { type: "string" },
      ...TAIL_FLAGS,
      jobs: { type: "string" },
      json: { type: "boolean" },
      svg: { type: "string" },
      ...REPLICA_FLAGS,
      help: { type: "boolean", short: "h" },
    },
  });
}
