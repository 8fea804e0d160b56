/**
 * What predict-on-route costs a routing decision in the gateway's shape
 * (`npx tsx bench/predict-route-bench.ts`): 8 workers, 16 conversations whose first
 * 8,000 tokens their worker's engine has reported, each decision an 8,800-token turn of
 * one of them (hash, lookup, scoring, in-flight record, the prediction's match, confirm
 * and record; first token and done reported after it, 5 ms of virtual time apart). Two
 * routers over the same index, one with `PredictedBlocks` (the service's defaults: 2 s
 * TTL) and one without, take turns in rounds so both see the same machine load.
 *
 * Options (env): PREDICT_BENCH_ROUNDS (default 6), PREDICT_BENCH_ITERS (decisions per
 * router per round, default 20,000). Prints each round and one JSON line: µs (wall and
 * CPU) per decision with and without prediction, their medians and the difference.
 */

import { loadavg } from "node:os";
import { performance } from "node:perf_hooks";
import { RadixTreeIndex } from "../src/index/radix-tree.js";
import { InFlightTracker } from "../src/load/in-flight.js";
import { LoadTracker } from "../src/load/load-tracker.js";
import { WorkerRegistry } from "../src/load/worker-registry.js";
import { PredictedBlocks } from "../src/predict/predicted-blocks.js";
import { engineHashFromSafeInt } from "../src/protocol/engine-hash.js";
import type { WorkerKey } from "../src/protocol/worker.js";
import { Router } from "../src/router.js";
import { DEFAULT_SCHEDULER_CONFIG } from "../src/scheduler/defaults.js";
import { seededRng } from "../src/util/rng.js";

const BS = 16;
const WORKERS = 8;
const CONVERSATIONS = 16;
const PROMPT_TOKENS = 8_800;
const REPORTED_TOKENS = 8_000;
const ROUNDS = Number(process.env.PREDICT_BENCH_ROUNDS ?? 6);
const ITERS = Number(process.env.PREDICT_BENCH_ITERS ?? 20_000);

const conversation = (c: number) =>
  Array.from({ length: PROMPT_TOKENS }, (_, t) => c * 1_000_000 + t);

interface Side {
  readonly router: Router;
  readonly inFlight: InFlightTracker;
  now: number;
  next: number;
}

function side(predict: boolean): Side {
  const index = new RadixTreeIndex({ blockSize: BS });
  const registry = new WorkerRegistry();
  const loads = new LoadTracker({ staleAfterMs: 3_600_000 });
  const inFlight = new InFlightTracker({ prefillTtlMs: 3_600_000, ttlMs: 3_600_000 });
  const keys: WorkerKey[] = [];
  for (let i = 0; i < WORKERS; i++) {
    const info = registry.upsert({
      workerId: `w${i}`,
      url: `http://10.0.0.${i}:8000`,
      kind: "vllm",
      blockSize: BS,
      numGpuBlocks: 16_384,
    });
    keys.push(info.key);
    loads.update(info.key, { running: 2, waiting: 0, kvUsage: 0.2, atMs: 0 }, 0);
  }
  let hash = 1;
  for (let c = 0; c < CONVERSATIONS; c++) {
    const tokenIds = conversation(c).slice(0, REPORTED_TOKENS);
    const blocks = tokenIds.length / BS;
    index.applyEvent(keys[c % WORKERS]!, {
      type: "stored",
      blockHashes: Array.from({ length: blocks }, () => engineHashFromSafeInt(hash++)),
      parentHash: null,
      tokenIds,
      blockSize: BS,
      loraId: null,
      loraName: null,
      medium: "GPU",
      tier: "gpu",
    });
  }
  const s: Side = {
    inFlight,
    now: 1_000,
    next: 0,
    router: new Router({
      index,
      registry,
      loads,
      inFlight,
      config: DEFAULT_SCHEDULER_CONFIG,
      rng: seededRng(7),
      clock: () => s.now,
      ...(predict
        ? {
            predicted: new PredictedBlocks({
              ttlMs: 2_000,
              maxBlocksPerWorker: 200_000,
              degradedTtlMs: 60_000,
            }),
          }
        : {}),
    }),
  };
  return s;
}

const prompts = Array.from({ length: CONVERSATIONS }, (_, c) => conversation(c));

function run(s: Side): { us: number; cpuUs: number } {
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  for (let i = 0; i < ITERS; i++) {
    s.now += 5;
    const id = `r${s.next++}`;
    const res = s.router.route(
      { tokenIds: prompts[s.next % CONVERSATIONS]!, requestId: id },
      s.now,
    );
    if (!res.ok) throw new Error(res.error.message);
    s.inFlight.firstToken(id, s.now + 1);
    s.inFlight.done(id, s.now + 2);
  }
  const c = process.cpuUsage(c0);
  return { us: ((performance.now() - t0) * 1000) / ITERS, cpuUs: (c.user + c.system) / ITERS };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const r2 = (x: number) => Math.round(x * 100) / 100;

const load0 = loadavg()[0]!;
const sides = { predict: side(true), none: side(false) };
run(sides.predict); // warm-up (compilation), not counted
run(sides.none);
const rounds: { predict: { us: number; cpuUs: number }; none: { us: number; cpuUs: number } }[] =
  [];
for (let r = 0; r < ROUNDS; r++) {
  const order = r % 2 === 0 ? (["predict", "none"] as const) : (["none", "predict"] as const);
  const out = {} as (typeof rounds)[number];
  for (const k of order) out[k] = run(sides[k]);
  rounds.push(out);
  console.log(
    `round ${r + 1}: with prediction ${out.predict.cpuUs.toFixed(1)} µs CPU per decision, without ${out.none.cpuUs.toFixed(1)}`,
  );
}
const predictCpu = median(rounds.map((r) => r.predict.cpuUs));
const noneCpu = median(rounds.map((r) => r.none.cpuUs));
console.log(
  JSON.stringify({
    bench: "predict-route",
    workers: WORKERS,
    prompt_tokens: PROMPT_TOKENS,
    reported_tokens: REPORTED_TOKENS,
    iters_per_round: ITERS,
    predict_us: r2(median(rounds.map((r) => r.predict.us))),
    predict_cpu_us: r2(predictCpu),
    none_us: r2(median(rounds.map((r) => r.none.us))),
    none_cpu_us: r2(noneCpu),
    predict_extra_cpu_us: r2(predictCpu - noneCpu),
    load_avg_start: r2(load0),
    load_avg_end: r2(loadavg()[0]!),
    rounds: rounds.map((r) => ({
      predict_cpu_us: r2(r.predict.cpuUs),
      none_cpu_us: r2(r.none.cpuUs),
    })),
  }),
);
