/**
 * Fleet benchmark (`npm run bench:fleet`): the prefix index with thousands of workers,
 * in the shape of Dynamo's indexer benchmark (ai-dynamo/dynamo
 * `lib/kv-router/benches/mooncake_bench.rs`, read 2026-11-23): the Mooncake conversation
 * trace partitioned over N simulated workers, events (`applyEvent`) and route lookups
 * (`findMatches`) mixed in trace order, one thread. Dynamo counts ops = lookups + events
 * and reports the lookups' p99; so do we. Workload: `fleet-workload.ts`.
 *
 * Each fleet size runs in its own process (fresh heap, `--expose-gc`). Besides the mixed
 * run it probes how a lookup's cost grows with the fleet: `findMatches` of a prompt one
 * worker holds, of a prompt nobody holds, and of the trace's shared first prompt; and a
 * whole `Router.route` decision (which scores every routable worker).
 *
 * Options (env): FLEET_BENCH_WORKERS (default 10,100,1000,7000), FLEET_BENCH_TRACE
 * (default traces/mooncake-conversation-2k.jsonl), FLEET_BENCH_REQUESTS_PER_WORKER
 * (default 8; at least the whole trace), FLEET_BENCH_GPU_BLOCKS (default 1024).
 * Prints a table, then one JSON line whose top level is the largest fleet's run.
 */

import { spawnSync } from "node:child_process";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { computeBlockKeys } from "../src/index/block-key.js";
import { RadixTreeIndex } from "../src/index/radix-tree.js";
import type { BlockKeySeq } from "../src/index/types.js";
import { InFlightTracker } from "../src/load/in-flight.js";
import { LoadTracker } from "../src/load/load-tracker.js";
import { WorkerRegistry } from "../src/load/worker-registry.js";
import { engineHashFromSafeInt } from "../src/protocol/engine-hash.js";
import { Router } from "../src/router.js";
import { DEFAULT_SCHEDULER_CONFIG } from "../src/scheduler/defaults.js";
import { blockTokens, fleetOps, loadTrace, workerKeyOf } from "./fleet-workload.js";

const SELF = fileURLToPath(import.meta.url);
const TRACE =
  process.env.FLEET_BENCH_TRACE ??
  fileURLToPath(new URL("../traces/mooncake-conversation-2k.jsonl", import.meta.url));
const PER_WORKER = Number(process.env.FLEET_BENCH_REQUESTS_PER_WORKER ?? 8);
const GPU_BLOCKS = Number(process.env.FLEET_BENCH_GPU_BLOCKS ?? 1024);
const BLOCK_SIZE = 16;
/** Block ids of the probes' prompts (see `runChild`). */
const PROBE_ONE = 0x7f000000;
const PROBE_MISS = 0x7e000000;

interface RunResult {
  workers: number;
  requests: number;
  lookups: number;
  events: number;
  ops_per_s: number;
  wall_ops_per_s: number;
  p50_us: number;
  p99_us: number;
  event_p99_us: number;
  heap_mb: number;
  index_nodes: number;
  worker_blocks: number;
  probe_one_holder_us: number;
  probe_miss_us: number;
  probe_shared_us: number;
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

function runChild(workers: number): RunResult {
  const trace = loadTrace(TRACE);
  const requests = Math.max(trace.length, workers * PER_WORKER);
  const index = new RadixTreeIndex({ blockSize: BLOCK_SIZE });
  const lookupUs: number[] = [];
  const eventUs: number[] = [];
  let busyMs = 0;
  const wall0 = performance.now();
  for (const op of fleetOps(trace, {
    workers,
    requests,
    gpuBlocks: GPU_BLOCKS,
    blockSize: BLOCK_SIZE,
    seed: 42,
  })) {
    const t0 = performance.now();
    if (op.kind === "lookup") index.findMatches(op.keys);
    else index.applyEvent(op.worker, op.event);
    const dt = performance.now() - t0;
    busyMs += dt;
    (op.kind === "lookup" ? lookupUs : eventUs).push(dt * 1000);
  }
  const wallMs = performance.now() - wall0;
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
  const probe = (keys: BlockKeySeq) => meanUs(() => index.findMatches(keys), n);
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
  const ops = lk.length + ev.length;
  return {
    workers,
    requests,
    lookups: lk.length,
    events: ev.length,
    ops_per_s: Math.round(ops / (busyMs / 1000)),
    wall_ops_per_s: Math.round(ops / (wallMs / 1000)),
    p50_us: +pct(lk, 0.5).toFixed(1),
    p99_us: +pct(lk, 0.99).toFixed(1),
    event_p99_us: +pct(ev, 0.99).toFixed(1),
    heap_mb: +heap.toFixed(1),
    index_nodes: stats.nodes,
    worker_blocks: stats.workerBlocks,
    probe_one_holder_us: +probe(one).toFixed(2),
    probe_miss_us: +probe(miss).toFixed(2),
    probe_shared_us: +probe(shared).toFixed(2),
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
  console.log(`trace ${TRACE}, ${PER_WORKER} requests per worker, ${GPU_BLOCKS} GPU blocks each`);
  console.log(
    "workers  requests   ops/s(busy)  ops/s(wall)  lookup p50/p99 µs  event p99 µs  heap MB  | findMatches µs: 1 holder / miss / shared (holders) | route µs",
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
      `${String(w).padStart(7)}  ${String(r.requests).padStart(8)}  ${String(r.ops_per_s).padStart(12)}  ${String(r.wall_ops_per_s).padStart(11)}  ${`${r.p50_us} / ${r.p99_us}`.padStart(17)}  ${String(r.event_p99_us).padStart(12)}  ${String(r.heap_mb).padStart(7)}  | ${r.probe_one_holder_us} / ${r.probe_miss_us} / ${r.probe_shared_us} (${r.probe_shared_holders}) | ${r.route_one_holder_us}`,
    );
  }
  const last = results[results.length - 1]!;
  console.log(
    JSON.stringify({
      bench: "fleet",
      workers: last.workers,
      ops_per_s: last.ops_per_s,
      p99_us: last.p99_us,
      heap_mb: last.heap_mb,
      runs: results,
    }),
  );
}
