/**
 * Fleet benchmark (`npm run bench:fleet`): the prefix index with thousands of workers,
 * in the shape of Dynamo's indexer benchmark (ai-dynamo/dynamo
 * `lib/bench/kv_router/mooncake_bench.rs` with `common/mod.rs` and `common/args.rs`,
 * formerly `lib/kv-router/benches/`; its results and commands in
 * `lib/kv-router/SHARDING_BENCHMARK_RESULTS.md`; read 2026-11-23): events
 * (`applyEvent`) and route lookups mixed in trace order, one thread. Like Dynamo, ops =
 * lookups + events, and the p99 is the lookups' (Dynamo times `find_matches` only).
 *
 * Shapes (FLEET_BENCH_SHAPE):
 * - `dynamo` (default): Dynamo's 7,000-worker setup, `--num-unique-inference-workers
 *   1000 -d 7`: the full conversation trace (12,031 requests) partitioned at random over
 *   min(N, 1,000) unique workers, each replayed by N / unique replicas with the same
 *   requests and the same events (same hashes), 16,384-block caches (Dynamo's default);
 *   a request's output fills one decode block per 128 tokens, each stored by its own
 *   event as Dynamo's mock engine does (~3.2 events per request, as in Dynamo's op counts).
 *   Every replica holds what its worker holds, so the trace's first block (in every
 *   request) is held by almost the whole fleet and every lookup meets ~N holders.
 * - `disjoint` (this bench before 2026-11-23, harder on events): the 2,000-request
 *   slice copied into hash-disjoint copies until there are 8 requests per worker, each
 *   request on a random one of N distinct workers with 1,024-block caches (≈ 10× the
 *   evictions, so more and larger `removed` events), no decode blocks: one large
 *   `stored` event per request.
 * Both differ from Dynamo in one way that makes ours harder: our stored events carry
 * token ids (vLLM's wire format) that the index hashes into block keys itself, inside
 * the timed `applyEvent`; Dynamo's events carry precomputed hashes. Lookups get
 * precomputed keys in both. Dynamo replays on a wall clock with tokio tasks and sweeps
 * the offered rate; we replay closed-loop on one thread and divide by the time spent in
 * the index (`ops/s (busy)`), which is the single core's saturated rate.
 *
 * The lookup timed is `matchInto` (the complete per-worker answer in reused typed
 * arrays, match-buffer.ts); FLEET_BENCH_LOOKUP=objects times `findMatches` (an object
 * per holder, sorted by worker key) instead. Each fleet size runs in its own process
 * (fresh heap, `--expose-gc`). Probes: a prompt one worker holds, a miss, the trace's
 * first prompt (both lookups), and a whole `Router.route` (scores every routable worker).
 *
 * Options (env): FLEET_BENCH_WORKERS (default 10,100,1000,7000), FLEET_BENCH_TRACE
 * (default traces/conversation_trace.jsonl if present, see traces/README.md, else the
 * 2k slice), FLEET_BENCH_UNIQUE (dynamo: default 1000), FLEET_BENCH_GPU_BLOCKS,
 * FLEET_BENCH_REQUESTS_PER_WORKER (disjoint: default 8). Prints a table, then one JSON
 * line whose top level is the largest fleet's run.
 */

import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { computeBlockKeys } from "../src/index/block-key.js";
import { MatchBuffer } from "../src/index/match-buffer.js";
import { RadixTreeIndex } from "../src/index/radix-tree.js";
import type { BlockKeySeq } from "../src/index/types.js";
import { InFlightTracker } from "../src/load/in-flight.js";
import { LoadTracker } from "../src/load/load-tracker.js";
import { WorkerRegistry } from "../src/load/worker-registry.js";
import { engineHashFromSafeInt } from "../src/protocol/engine-hash.js";
import { Router } from "../src/router.js";
import { DEFAULT_SCHEDULER_CONFIG } from "../src/scheduler/defaults.js";
import { blockTokens, type FleetOp, fleetOps, loadTrace, workerKeyOf } from "./fleet-workload.js";

const SELF = fileURLToPath(import.meta.url);
const SHAPE = process.env.FLEET_BENCH_SHAPE ?? "dynamo";
if (SHAPE !== "dynamo" && SHAPE !== "disjoint") {
  throw new Error(`FLEET_BENCH_SHAPE must be dynamo or disjoint, got ${SHAPE}`);
}
const SLICE = fileURLToPath(new URL("../traces/mooncake-conversation-2k.jsonl", import.meta.url));
const FULL = fileURLToPath(new URL("../traces/conversation_trace.jsonl", import.meta.url));
const TRACE =
  process.env.FLEET_BENCH_TRACE ?? (SHAPE === "dynamo" && existsSync(FULL) ? FULL : SLICE);
const PER_WORKER = Number(process.env.FLEET_BENCH_REQUESTS_PER_WORKER ?? 8);
const UNIQUE = Number(process.env.FLEET_BENCH_UNIQUE ?? 1000);
const GPU_BLOCKS = Number(
  process.env.FLEET_BENCH_GPU_BLOCKS ?? (SHAPE === "dynamo" ? 16384 : 1024),
);
const OBJECTS = process.env.FLEET_BENCH_LOOKUP === "objects";
/** Output tokens per decode block (Dynamo's default block size); 0 = none. */
const DECODE_TOKENS = Number(process.env.FLEET_BENCH_DECODE_TOKENS ?? 128);
const BLOCK_SIZE = 16;
/** Block ids of the probes' prompts (see `runChild`). */
const PROBE_ONE = 0x7f000000;
const PROBE_MISS = 0x7e000000;

interface RunResult {
  workers: number;
  unique_workers: number;
  replicas: number;
  requests: number;
  lookups: number;
  events: number;
  ops_per_s: number;
  wall_ops_per_s: number;
  lookup_busy_ms: number;
  event_busy_ms: number;
  p50_us: number;
  p99_us: number;
  event_p99_us: number;
  heap_mb: number;
  index_nodes: number;
  worker_blocks: number;
  probe_one_holder_us: number;
  probe_miss_us: number;
  probe_shared_us: number;
  probe_shared_objects_us: number;
  probe_shared_holders: number;
  route_one_holder_us: number;
}

const pct = (a: Float64Array, p: number) => a[Math.min(a.length - 1, Math.floor(p * a.length))]!;

function meanUs(f: () => void, n: number): number {
  for (let i = 0; i < Math.min(200, n); i++) f();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) f();
  return ((performance.now() - t0) * 1000) / n;
}

function heapMb(): number {
  const gc = (globalThis as { gc?: () => void }).gc!;
  for (let i = 0; i < 3; i++) gc();
  const m = process.memoryUsage();
  return (m.heapUsed + m.arrayBuffers) / 2 ** 20;
}

/** Unique workers, replicas of each and trace copies for a fleet of `workers`. */
function plan(workers: number, traceLength: number) {
  if (SHAPE === "disjoint") {
    return {
      unique: workers,
      replicas: 1,
      copies: Math.ceil((workers * PER_WORKER) / traceLength),
    };
  }
  const unique = Math.min(workers, UNIQUE);
  if (workers % unique !== 0) throw new Error(`${workers} workers is not a multiple of ${unique}`);
  return { unique, replicas: workers / unique, copies: 1 };
}

function runChild(workers: number): RunResult {
  const trace = loadTrace(TRACE);
  const { unique, replicas, copies } = plan(workers, trace.length);
  const index = new RadixTreeIndex({ blockSize: BLOCK_SIZE });
  const buf = new MatchBuffer();
  const lookupUs: number[] = [];
  const eventUs: number[] = [];
  // Generated before the clock starts (as Dynamo does), so the timed loop allocates
  // nothing of the workload's and its garbage collections are the index's own.
  let ops: FleetOp[] | null = [
    ...fleetOps(trace, {
      uniqueWorkers: unique,
      replicas,
      copies,
      decodeTokensPerBlock: SHAPE === "dynamo" ? DECODE_TOKENS : 0,
      gpuBlocks: GPU_BLOCKS,
      blockSize: BLOCK_SIZE,
      seed: 42,
    }),
  ];
  (globalThis as { gc?: () => void }).gc?.();
  let busyMs = 0;
  let lookupMs = 0;
  const wall0 = performance.now();
  for (const op of ops) {
    const t0 = performance.now();
    if (op.kind === "lookup") {
      if (OBJECTS) index.findMatches(op.keys);
      else index.matchInto(op.keys, buf);
    } else index.applyEvent(op.worker, op.event);
    const dt = performance.now() - t0;
    busyMs += dt;
    if (op.kind === "lookup") lookupMs += dt;
    (op.kind === "lookup" ? lookupUs : eventUs).push(dt * 1000);
  }
  const wallMs = performance.now() - wall0;
  ops = null;
  const heap = heapMb();
  const stats = index.stats();

  // Probes: one holder (a 32-block chain only worker 0 holds), a miss, the shared prompt.
  // Their ids stay clear of the trace's (a few million at most): `blockTokens` hashes the
  // id in 32 bits, so 2 ** 40 + i would give the tokens of trace block i.
  const tokens: number[] = [];
  const hashes = [];
  for (let i = 0; i < 32; i++) {
    blockTokens(PROBE_ONE + i, BLOCK_SIZE, tokens);
    hashes.push(engineHashFromSafeInt(PROBE_ONE + i));
  }
  index.applyEvent(workerKeyOf(0), {
    type: "stored",
    blockHashes: hashes,
    parentHash: null,
    tokenIds: tokens,
    blockSize: BLOCK_SIZE,
    loraId: null,
    loraName: null,
    medium: "GPU",
    tier: "gpu",
  });
  const one = computeBlockKeys(tokens, BLOCK_SIZE, null);
  const missTokens: number[] = [];
  for (let i = 0; i < 32; i++) blockTokens(PROBE_MISS + i, BLOCK_SIZE, missTokens);
  const miss = computeBlockKeys(missTokens, BLOCK_SIZE, null);
  const sharedTokens: number[] = [];
  for (const id of trace[0]!.hashIds) blockTokens(id, BLOCK_SIZE, sharedTokens);
  const shared = computeBlockKeys(sharedTokens, BLOCK_SIZE, null);
  const n = workers >= 1000 ? 500 : 5000;
  const probe = (keys: BlockKeySeq) =>
    OBJECTS
      ? meanUs(() => index.findMatches(keys), n)
      : meanUs(() => index.matchInto(keys, buf), n);
  const holders = index.findMatches(shared).workers.filter((m) => m.gpu > 0).length;

  // A whole decision: every routable worker is scored.
  const registry = new WorkerRegistry();
  const loads = new LoadTracker({ staleAfterMs: 60_000 });
  const now = Date.now();
  for (let i = 0; i < workers; i++) {
    const info = registry.upsert({
      workerId: `w${i}`,
      url: `http://10.0.${i >> 8}.${i & 255}:8000`,
      kind: "vllm",
      blockSize: BLOCK_SIZE,
      numGpuBlocks: GPU_BLOCKS,
    });
    loads.update(info.key, { running: 1, waiting: 0, kvUsage: 0.3, atMs: now }, now);
  }
  const inFlight = new InFlightTracker({ prefillTtlMs: 60_000, ttlMs: 600_000 });
  const router = new Router({
    index,
    registry,
    loads,
    inFlight,
    config: DEFAULT_SCHEDULER_CONFIG,
    rng: Math.random,
  });
  let k = 0;
  const routeUs = meanUs(() => {
    const r = router.route({ tokenIds: tokens, requestId: `p${k++}` }, now);
    if (r.ok) inFlight.done(r.decision.requestId, now);
  }, n);

  const lk = Float64Array.from(lookupUs).sort();
  const ev = Float64Array.from(eventUs).sort();
  const total = lk.length + ev.length;
  return {
    workers,
    unique_workers: unique,
    replicas,
    requests: copies * trace.length * replicas,
    lookups: lk.length,
    events: ev.length,
    ops_per_s: Math.round(total / (busyMs / 1000)),
    wall_ops_per_s: Math.round(total / (wallMs / 1000)),
    lookup_busy_ms: Math.round(lookupMs),
    event_busy_ms: Math.round(busyMs - lookupMs),
    p50_us: +pct(lk, 0.5).toFixed(1),
    p99_us: +pct(lk, 0.99).toFixed(1),
    event_p99_us: +pct(ev, 0.99).toFixed(1),
    heap_mb: +heap.toFixed(1),
    index_nodes: stats.nodes,
    worker_blocks: stats.workerBlocks,
    probe_one_holder_us: +probe(one).toFixed(2),
    probe_miss_us: +probe(miss).toFixed(2),
    probe_shared_us: +probe(shared).toFixed(2),
    probe_shared_objects_us: +meanUs(() => index.findMatches(shared), n).toFixed(2),
    probe_shared_holders: holders,
    route_one_holder_us: +routeUs.toFixed(2),
  };
}

const child = process.argv.indexOf("--child");
if (child >= 0) {
  console.log(JSON.stringify(runChild(Number(process.argv[child + 1]))));
} else {
  const sizes = (process.env.FLEET_BENCH_WORKERS ?? "10,100,1000,7000").split(",").map(Number);
  const results: RunResult[] = [];
  console.log(
    `shape ${SHAPE}, trace ${TRACE}, ${GPU_BLOCKS} GPU blocks each, lookup ${OBJECTS ? "findMatches (objects)" : "matchInto"}`,
  );
  if (SHAPE === "dynamo" && TRACE === SLICE) {
    console.log("(full trace missing: traces/README.md says how to fetch it; using the 2k slice)");
  }
  console.log(
    "workers  unique×rep  lookups/events  ops/s(busy)  ops/s(wall)  lookup p50/p99 µs  event p99 µs  heap MB  | lookup µs: 1 holder / miss / shared (holders), shared as objects | route µs",
  );
  for (const w of sizes) {
    const run = spawnSync(
      process.execPath,
      ["--expose-gc", "--max-old-space-size=8192", "--import", "tsx", SELF, "--child", String(w)],
      { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] },
    );
    if (run.status !== 0) throw new Error(`fleet of ${w} failed (${run.status})`);
    const r = JSON.parse(run.stdout.trim().split("\n").pop()!) as RunResult;
    results.push(r);
    console.log(
      `${String(w).padStart(7)}  ${`${r.unique_workers}×${r.replicas}`.padStart(9)}  ${`${r.lookups}/${r.events}`.padStart(14)}  ${String(r.ops_per_s).padStart(11)}  ${String(r.wall_ops_per_s).padStart(11)}  ${`${r.p50_us} / ${r.p99_us}`.padStart(17)}  ${String(r.event_p99_us).padStart(12)}  ${String(r.heap_mb).padStart(7)}  | ${r.probe_one_holder_us} / ${r.probe_miss_us} / ${r.probe_shared_us} (${r.probe_shared_holders}), ${r.probe_shared_objects_us} | ${r.route_one_holder_us}`,
    );
  }
  const last = results[results.length - 1]!;
  console.log(
    JSON.stringify({
      bench: "fleet",
      shape: SHAPE,
      workers: last.workers,
      ops_per_s: last.ops_per_s,
      p99_us: last.p99_us,
      heap_mb: last.heap_mb,
      runs: results,
    }),
  );
}
