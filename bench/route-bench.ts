/**
 * Route decision cost at large fleets (`npm run bench:route`): one `Router.route` per
 * call (hash, lookup, scoring, in-flight record; `done` after it so the state stays
 * put) over 100 / 1,000 / 7,000 workers, full scoring (`fullScoring: true`, every
 * candidate an object: the path before the column scorer) against the column path,
 * interleaved in rounds over the same state so both see the same machine load.
 *
 * Fleets: every worker scraped (fresh snapshot, KV 0–45 %), a third with requests in
 * flight. Prompts (32 blocks of 16 tokens):
 * - `empty`: an empty index (nobody holds anything);
 * - `few`: the prompt's prefix held by 8 workers at various depths and tiers, and every
 *   worker holding some other prompt (the index has fleet × 8 blocks);
 * - `shared`: the prompt's first block held by every worker (a system prompt on the whole
 *   fleet, the shape of Dynamo's benchmark), the next ones by few: the index lookup
 *   (`findMatches`, an object per holder) is then the larger part, and it is
 *   `src/index/`'s.
 *
 * Options (env): ROUTE_BENCH_WORKERS (default 100,1000,7000), ROUTE_BENCH_ROUNDS
 * (default 8), ROUTE_BENCH_MS (time per path per round per cell, default 150). Prints a
 * table and one JSON line: per fleet and prompt µs per route before/after, and the
 * ratio; the load average at start and end (the machine is shared: compare ratios).
 */

import { loadavg } from "node:os";
import { performance } from "node:perf_hooks";
import { RadixTreeIndex } from "../src/index/radix-tree.js";
import { InFlightTracker } from "../src/load/in-flight.js";
import { LoadTracker } from "../src/load/load-tracker.js";
import { WorkerRegistry } from "../src/load/worker-registry.js";
import { engineHashFromSafeInt } from "../src/protocol/engine-hash.js";
import type { WorkerKey } from "../src/protocol/worker.js";
import { Router } from "../src/router.js";
import { DEFAULT_SCHEDULER_CONFIG } from "../src/scheduler/defaults.js";
import { seededRng } from "../src/util/rng.js";

const BS = 16;
const PROMPT_BLOCKS = 32;
const SIZES = (process.env.ROUTE_BENCH_WORKERS ?? "100,1000,7000").split(",").map(Number);
const ROUNDS = Number(process.env.ROUTE_BENCH_ROUNDS ?? 8);
const CELL_MS = Number(process.env.ROUTE_BENCH_MS ?? 150);

type Shape = "empty" | "few" | "shared";
const SHAPES: readonly Shape[] = ["empty", "few", "shared"];

function tokens(family: number, blocks: number): number[] {
  return Array.from({ length: blocks * BS }, (_, t) => family * 1_000_000 + t);
}

function fleet(workers: number, shape: Shape) {
  const g = seededRng(workers * 13 + shape.length);
  const index = new RadixTreeIndex({ blockSize: BS });
  const registry = new WorkerRegistry();
  const loads = new LoadTracker({ staleAfterMs: 3_600_000 });
  const inFlight = new InFlightTracker({ prefillTtlMs: 3_600_000, ttlMs: 3_600_000 });
  const now = 1_000;
  let hash = 1;
  const store = (key: WorkerKey, tokenIds: number[], parent: number | null, medium = "GPU") => {
    const blocks = tokenIds.length / BS;
    const hashes = Array.from({ length: blocks }, () => hash++);
    index.applyEvent(key, {
      type: "stored",
      blockHashes: hashes.map(engineHashFromSafeInt),
      parentHash: parent === null ? null : engineHashFromSafeInt(parent),
      tokenIds,
      blockSize: BS,
      loraId: null,
      loraName: null,
      medium,
      tier: medium === "GPU" ? "gpu" : medium === "CPU" ? "host" : "disk",
    });
    return hashes[hashes.length - 1]!;
  };
  const prompt = tokens(0, PROMPT_BLOCKS);
  for (let i = 0; i < workers; i++) {
    const info = registry.upsert({
      workerId: `w${i}`,
      url: `http://10.0.${i >> 8}.${i & 255}:8000`,
      kind: "vllm",
      blockSize: BS,
      numGpuBlocks: 16_384,
    });
    const kv = Math.floor(g() * 10) / 20;
    loads.update(
      info.key,
      { running: Math.floor(g() * 8), waiting: Math.floor(g() * 3), kvUsage: kv, atMs: now - 5 },
      now - 5,
    );
    if (i % 3 === 0) {
      for (let r = 0; r < 2; r++) {
        inFlight.add(`bg${i}-${r}`, info.key, {
          prefillTokens: 64 * (r + 1),
          blocks: 20,
          nowMs: now - 10 + r * 10,
        });
      }
    }
    if (shape === "few") {
      store(info.key, tokens(1 + (i % 97), 8), null);
      if (i % Math.floor(workers / 8) === 0) {
        store(info.key, prompt.slice(0, BS * (4 + (i % 24))), null, i % 5 === 0 ? "CPU" : "GPU");
      }
    } else if (shape === "shared") {
      // Everyone holds the first block (same hash: one system prompt); 8 hold more.
      index.applyEvent(info.key, {
        type: "stored",
        blockHashes: [engineHashFromSafeInt(999_999_999)],
        parentHash: null,
        tokenIds: prompt.slice(0, BS),
        blockSize: BS,
        loraId: null,
        loraName: null,
        medium: "GPU",
        tier: "gpu",
      });
      if (i % Math.floor(workers / 8) === 0) {
        store(info.key, prompt.slice(BS, BS * (4 + (i % 24))), 999_999_999);
      }
    }
  }
  const make = (fullScoring: boolean) =>
    new Router({
      index,
      registry,
      loads,
      inFlight,
      config: DEFAULT_SCHEDULER_CONFIG,
      rng: seededRng(7),
      clock: () => performance.now(),
      fullScoring,
    });
  return { before: make(true), after: make(false), inFlight, prompt, now };
}

interface Cell {
  calls: number;
  ms: number;
  /** CPU time of the process (user + system) over the cell: what descheduling does not inflate. */
  cpuMs: number;
  scoreMs: number;
  matchMs: number;
}

function runFor(
  router: Router,
  inFlight: InFlightTracker,
  prompt: number[],
  now: number,
  cell: Cell,
  tag: string,
) {
  const until = performance.now() + CELL_MS;
  const cpu0 = process.cpuUsage();
  let k = 0;
  while (performance.now() < until) {
    const t0 = performance.now();
    for (let j = 0; j < 4; j++) {
      const r = router.route({ tokenIds: prompt, requestId: `${tag}${k++}` }, now);
      if (!r.ok) throw new Error(r.error.message);
      cell.scoreMs += r.decision.timings.scoreMs;
      cell.matchMs += r.decision.timings.matchMs;
      inFlight.done(r.decision.requestId, now);
    }
    cell.ms += performance.now() - t0;
    cell.calls += 4;
  }
  const cpu = process.cpuUsage(cpu0);
  cell.cpuMs += (cpu.user + cpu.system) / 1000;
}

const load0 = loadavg()[0]!;
const results: Record<string, unknown>[] = [];
console.log(
  "workers  prompt   full µs/route  columns µs/route  ratio  CPU µs: full → columns  ratio  (scoring part µs: full → columns; lookup µs)",
);
for (const workers of SIZES) {
  for (const shape of SHAPES) {
    const f = fleet(workers, shape);
    const before: Cell = { calls: 0, ms: 0, cpuMs: 0, scoreMs: 0, matchMs: 0 };
    const after: Cell = { calls: 0, ms: 0, cpuMs: 0, scoreMs: 0, matchMs: 0 };
    // Warm-up of both paths, then rounds alternating which goes first.
    runFor(
      f.before,
      f.inFlight,
      f.prompt,
      f.now,
      { calls: 0, ms: 0, cpuMs: 0, scoreMs: 0, matchMs: 0 },
      "wb",
    );
    runFor(
      f.after,
      f.inFlight,
      f.prompt,
      f.now,
      { calls: 0, ms: 0, cpuMs: 0, scoreMs: 0, matchMs: 0 },
      "wa",
    );
    for (let r = 0; r < ROUNDS; r++) {
      if (r % 2 === 0) {
        runFor(f.before, f.inFlight, f.prompt, f.now, before, `b${r}-`);
        runFor(f.after, f.inFlight, f.prompt, f.now, after, `a${r}-`);
      } else {
        runFor(f.after, f.inFlight, f.prompt, f.now, after, `a${r}-`);
        runFor(f.before, f.inFlight, f.prompt, f.now, before, `b${r}-`);
      }
    }
    const us = (c: Cell, v: number) => +((1000 * v) / c.calls).toFixed(2);
    const row = {
      workers,
      prompt: shape,
      before_us: us(before, before.ms),
      after_us: us(after, after.ms),
      ratio: +(before.ms / before.calls / (after.ms / after.calls)).toFixed(2),
      before_cpu_us: us(before, before.cpuMs),
      after_cpu_us: us(after, after.cpuMs),
      cpu_ratio: +(before.cpuMs / before.calls / (after.cpuMs / after.calls)).toFixed(2),
      before_score_us: us(before, before.scoreMs),
      after_score_us: us(after, after.scoreMs),
      lookup_us: us(after, after.matchMs),
      column_decisions: f.after.columnStats.decisions,
      column_fallbacks: f.after.columnStats.fallbacks,
    };
    results.push(row);
    console.log(
      `${String(workers).padStart(7)}  ${shape.padEnd(7)} ${String(row.before_us).padStart(13)}  ${String(row.after_us).padStart(16)}  ${String(row.ratio).padStart(5)}×  ${String(row.before_cpu_us).padStart(10)} → ${String(row.after_cpu_us).padEnd(9)} ${String(row.cpu_ratio).padStart(5)}×  (${row.before_score_us} → ${row.after_score_us}; ${row.lookup_us})`,
    );
  }
}
const load1 = loadavg()[0]!;
console.log(`load average ${load0.toFixed(2)} → ${load1.toFixed(2)} (2 cores, shared)`);
const largest = results.filter((r) => r.workers === Math.max(...SIZES));
console.log(
  JSON.stringify({
    workers: Math.max(...SIZES),
    before_us: largest.find((r) => r.prompt === "empty")?.before_us,
    after_us: largest.find((r) => r.prompt === "empty")?.after_us,
    before_cpu_us: largest.find((r) => r.prompt === "empty")?.before_cpu_us,
    after_cpu_us: largest.find((r) => r.prompt === "empty")?.after_cpu_us,
    load_avg_start: +load0.toFixed(2),
    load_avg_end: +load1.toFixed(2),
    runs: results,
  }),
);
