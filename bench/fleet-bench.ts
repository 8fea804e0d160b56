/**
 * Fleet benchmark (`npm run bench:fleet`): the prefix index with thousands of workers,
 * in the shape of Dynamo's indexer benchmark (ai-dynamo/dynamo
 * `lib/bench/kv_router/mooncake_bench.rs` with `common/mod.rs` and `common/args.rs`,
 * formerly `lib/kv-router/benches/`; its commands and results in
 * `lib/kv-router/BENCH_SETUP.md` and `SHARDING_BENCHMARK_RESULTS.md`; read 2026-11-23): events
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
 * FLEET_BENCH_REQUESTS_PER_WORKER (disjoint: default 8), FLEET_BENCH_PACK (default 1:
 * the workload's arrays in one buffer each, see `packWorkload`). Prints a table, then one JSON
 * line whose top level is the largest fleet's run.
 */

import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { computeBlockKeys } from "../src/index/block-key.js";
import { MatchBuffer } from "../src/index/match-buffer.js";
import { RadixTreeIndex } from "../src/index/radix-tree.js";
import type {
  BlockKeySeq,
  HashWords,
  RemovedWords,
  StoredWords,
  TokenWords,
} from "../src/index/types.js";
import { InFlightTracker } from "../src/load/in-flight.js";
import { LoadTracker } from "../src/load/load-tracker.js";
import { WorkerRegistry } from "../src/load/worker-registry.js";
import { type EngineBlockHash, engineHashFromSafeInt } from "../src/protocol/engine-hash.js";
import type { KvEvent } from "../src/protocol/events.js";
import type { WorkerKey } from "../src/protocol/worker.js";
import { Router } from "../src/router.js";
import { DEFAULT_SCHEDULER_CONFIG } from "../src/scheduler/defaults.js";
import { blockTokens, fleetOps, loadTrace, workerKeyOf } from "./fleet-workload.js";

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
/** Events as the service applies them: `strings` = `applyEvent`, `words` = the tapes' path. */
const EVENTS = process.env.FLEET_BENCH_EVENTS ?? "words";
if (EVENTS !== "words" && EVENTS !== "strings") {
  throw new Error(`FLEET_BENCH_EVENTS must be words or strings, got ${EVENTS}`);
}
/** Workload arrays in one buffer each (see `packWorkload`); FLEET_BENCH_PACK=0 = apart. */
const PACK = process.env.FLEET_BENCH_PACK !== "0";
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
  /** Ops per second of the process's CPU time over the timed loop (all threads). */
  cpu_ops_per_s: number;
  lookup_busy_ms: number;
  event_busy_ms: number;
  p50_us: number;
  p99_us: number;
  event_p99_us: number;
  heap_mb: number;
  /** `heap_mb` without the index's growable pools. */
  heap_js_mb: number;
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

/**
 * Heap and array buffers, with the index's growable pools (records, holder lists) that
 * `arrayBuffers` omits. Before 2026-11-23 the records were resizable buffers, which it
 * omits as well, and this figure left them out (`heap_js_mb` is that definition).
 */
function heapMb(index: RadixTreeIndex): number {
  const gc = (globalThis as { gc?: () => void }).gc!;
  for (let i = 0; i < 3; i++) gc();
  const m = process.memoryUsage();
  return (m.heapUsed + m.arrayBuffers + index.poolBytes) / 2 ** 20;
}

/**
 * An event as the decode thread hands it to the index (`src/ingest/tape-apply.ts`):
 * 64-bit hashes as word pairs, tokens as words, no strings. Built before the clock.
 */
interface StoredTape {
  readonly kind: "stored";
  readonly ev: StoredWords;
}
interface RemovedTape {
  readonly kind: "removed";
  readonly ev: RemovedWords;
}
type WordsEvent = StoredTape | RemovedTape;
/** Op kinds in the schedule's kind column. */
const LOOKUP = 0;
const STORED = 1;
const REMOVED = 2;
const STRING_EVENT = 3;

function hashWords(hashes: readonly EngineBlockHash[], parent: EngineBlockHash | null): HashWords {
  const all = parent === null ? hashes : [parent, ...hashes];
  const words = new Uint32Array(2 * all.length) as HashWords;
  all.forEach((h, i) => {
    words[2 * i] = Number.parseInt(h.slice(0, 8), 16);
    words[2 * i + 1] = Number.parseInt(h.slice(8, 16), 16);
  });
  return words;
}

function wordsOf(event: KvEvent): WordsEvent {
  if (event.type === "stored") {
    const p = event.parentHash;
    return {
      kind: "stored",
      ev: {
        hashes: hashWords(event.blockHashes, p),
        first: p === null ? 0 : 1,
        count: event.blockHashes.length,
        tier: event.tier,
        parentPair: p === null ? -1 : 0,
        tokens: Uint32Array.from(event.tokenIds) as TokenWords,
        tokenOffset: 0,
        tokenCount: event.tokenIds.length,
        blockSize: event.blockSize,
        loraName: event.loraName,
        loraId: event.loraId,
      },
    };
  }
  if (event.type !== "removed") throw new Error(`no ${event.type} events in this workload`);
  const hashes = hashWords(event.blockHashes, null);
  return {
    kind: "removed",
    ev: { hashes, first: 0, count: event.blockHashes.length, tier: event.tier },
  };
}

/**
 * Moves the prompts' keys and the events' hash and token words into one buffer each (the
 * arrays become views of it). Generated one by one they were ~160k small array buffers,
 * each an external backing store that every mark-compact of the timed loop swept: the
 * three mark-compacts that the index's growing tables set off took 50–110 ms each, about
 * the bench's own heap rather than the index's (a service decodes events into a few
 * large tapes, src/protocol/event-tape.ts). FLEET_BENCH_PACK=0 keeps them apart.
 */
function packWorkload(keys: BlockKeySeq[], tapes: WordsEvent[]): void {
  let n = 0;
  for (const k of keys) n += k.length;
  const keyArena = new Uint32Array(n);
  let at = 0;
  keys.forEach((k, i) => {
    keyArena.set(k, at);
    keys[i] = keyArena.subarray(at, at + k.length) as BlockKeySeq;
    at += k.length;
  });
  n = 0;
  for (const t of tapes) n += t.ev.hashes.length + (t.kind === "stored" ? t.ev.tokens.length : 0);
  const arena = new Uint32Array(n);
  at = 0;
  const put = (a: Uint32Array): Uint32Array => {
    arena.set(a, at);
    at += a.length;
    return arena.subarray(at - a.length, at);
  };
  tapes.forEach((t, i) => {
    const hashes = put(t.ev.hashes) as HashWords;
    tapes[i] =
      t.kind === "stored"
        ? { kind: "stored", ev: { ...t.ev, hashes, tokens: put(t.ev.tokens) as TokenWords } }
        : { kind: "removed", ev: { ...t.ev, hashes } };
  });
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
  // Generated before the clock starts (as Dynamo does) into flat arrays: one typed-array
  // row per op and one object per distinct prompt or event (replicas share them), so the
  // heap the timed loop runs beside is small and its garbage collections cost what they
  // would in the service. The timed loop allocates nothing of its own.
  const keyList: BlockKeySeq[] = [];
  const eventList: KvEvent[] = [];
  const tapeList: WordsEvent[] = [];
  const workerList: WorkerKey[] = [];
  const keyIds = new Map<BlockKeySeq, number>();
  const eventIds = new Map<KvEvent, number>();
  const workerIds = new Map<WorkerKey, number>();
  const kindCol: number[] = [];
  const refCol: number[] = [];
  const workerCol: number[] = [];
  for (const op of fleetOps(trace, {
    uniqueWorkers: unique,
    replicas,
    copies,
    decodeTokensPerBlock: SHAPE === "dynamo" ? DECODE_TOKENS : 0,
    gpuBlocks: GPU_BLOCKS,
    blockSize: BLOCK_SIZE,
    seed: 42,
  })) {
    if (op.kind === "lookup") {
      let k = keyIds.get(op.keys);
      if (k === undefined) {
        k = keyList.push(op.keys) - 1;
        keyIds.set(op.keys, k);
      }
      kindCol.push(LOOKUP);
      refCol.push(k);
      workerCol.push(-1);
      continue;
    }
    let w = workerIds.get(op.worker);
    if (w === undefined) {
      w = workerList.push(op.worker) - 1;
      workerIds.set(op.worker, w);
    }
    let e = eventIds.get(op.event);
    if (e === undefined) {
      if (EVENTS === "strings") e = eventList.push(op.event) - 1;
      else e = tapeList.push(wordsOf(op.event)) - 1;
      eventIds.set(op.event, e);
    }
    kindCol.push(
      EVENTS === "strings" ? STRING_EVENT : tapeList[e]!.kind === "stored" ? STORED : REMOVED,
    );
    refCol.push(e);
    workerCol.push(w);
  }
  keyIds.clear();
  eventIds.clear();
  if (PACK) packWorkload(keyList, tapeList);
  const kinds = Uint8Array.from(kindCol);
  const refs = Int32Array.from(refCol);
  const opWorkers = Int32Array.from(workerCol);
  kindCol.length = 0;
  refCol.length = 0;
  workerCol.length = 0;
  let nLookups = 0;
  for (let i = 0; i < kinds.length; i++) if (kinds[i] === LOOKUP) nLookups++;
  const lookupUs = new Float64Array(nLookups);
  const eventUs = new Float64Array(kinds.length - nLookups);
  let li = 0;
  let ei = 0;
  (globalThis as { gc?: () => void }).gc?.();
  let busyMs = 0;
  let lookupMs = 0;
  const wall0 = performance.now();
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < kinds.length; i++) {
    const kind = kinds[i]!;
    const ref = refs[i]!;
    const t0 = performance.now();
    if (kind === LOOKUP) {
      if (OBJECTS) index.findMatches(keyList[ref]!);
      else index.matchInto(keyList[ref]!, buf);
    } else if (kind === STORED) {
      index.applyStoredWords(workerList[opWorkers[i]!]!, (tapeList[ref] as StoredTape).ev);
    } else if (kind === REMOVED) {
      index.applyRemovedWords(workerList[opWorkers[i]!]!, (tapeList[ref] as RemovedTape).ev);
    } else index.applyEvent(workerList[opWorkers[i]!]!, eventList[ref]!);
    const dt = performance.now() - t0;
    busyMs += dt;
    if (kind === LOOKUP) {
      lookupMs += dt;
      lookupUs[li++] = dt * 1000;
    } else eventUs[ei++] = dt * 1000;
  }
  const wallMs = performance.now() - wall0;
  const cpu = process.cpuUsage(cpu0);
  const cpuMs = (cpu.user + cpu.system) / 1000;
  keyList.length = 0;
  eventList.length = 0;
  tapeList.length = 0;
  const heap = heapMb(index);
  const poolMb = index.poolBytes / 2 ** 20;
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

  const lk = lookupUs.sort();
  const ev = eventUs.sort();
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
    cpu_ops_per_s: Math.round(total / (cpuMs / 1000)),
    lookup_busy_ms: Math.round(lookupMs),
    event_busy_ms: Math.round(busyMs - lookupMs),
    p50_us: +pct(lk, 0.5).toFixed(1),
    p99_us: +pct(lk, 0.99).toFixed(1),
    event_p99_us: +pct(ev, 0.99).toFixed(1),
    heap_mb: +heap.toFixed(1),
    heap_js_mb: +(heap - poolMb).toFixed(1),
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
    "workers  unique×rep  lookups/events  ops/s(busy)  ops/s(wall)   ops/s(cpu)  lookup p50/p99 µs  event p99 µs  heap MB  | lookup µs: 1 holder / miss / shared (holders), shared as objects | route µs",
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
      `${String(w).padStart(7)}  ${`${r.unique_workers}×${r.replicas}`.padStart(9)}  ${`${r.lookups}/${r.events}`.padStart(14)}  ${String(r.ops_per_s).padStart(11)}  ${String(r.wall_ops_per_s).padStart(11)}  ${String(r.cpu_ops_per_s).padStart(11)}  ${`${r.p50_us} / ${r.p99_us}`.padStart(17)}  ${String(r.event_p99_us).padStart(12)}  ${String(r.heap_mb).padStart(7)}  | ${r.probe_one_holder_us} / ${r.probe_miss_us} / ${r.probe_shared_us} (${r.probe_shared_holders}), ${r.probe_shared_objects_us} | ${r.route_one_holder_us}`,
    );
  }
  const last = results[results.length - 1]!;
  console.log(
    JSON.stringify({
      bench: "fleet",
      shape: SHAPE,
      workers: last.workers,
      ops_per_s: last.ops_per_s,
      cpu_ops_per_s: last.cpu_ops_per_s,
      p99_us: last.p99_us,
      heap_mb: last.heap_mb,
      heap_js_mb: last.heap_js_mb,
      runs: results,
    }),
  );
}
