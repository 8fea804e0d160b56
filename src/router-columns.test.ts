/**
 * The column path (router-columns.ts, scheduler/schedule-columns.ts) must decide exactly
 * as full scoring (`RouterDeps.fullScoring`, every candidate an object through
 * `schedule`): two routers over two copies of the same random world, fed the same random
 * operations, must give equal answers (choice, reason, statistics, every explained
 * candidate's numbers, probabilities, rng draws, overlap sources) on every request, and
 * the column path must never have fallen back. The worlds cover what the rules read:
 * stale / pending / unknown / unreachable workers and both stale policies, KV outliers and
 * the hard cap (and the fallback when they would exclude everyone), prefixes held in
 * every tier and a shared store, predicted holders, queued prefill of the same and other
 * prefixes (the backlog weights), other replicas' load, models, excluded workers,
 * per-request weights, temperatures above 0, ties, and capacity unknown; engines
 * reporting what was routed to them and evicting part of it, and the worker just chosen
 * excluded by the next request (a retry) and its index entries then cleared (a reset).
 *
 * Long file: one random world (its shape, builder, operations and how each is applied)
 * that is only meaningful whole.
 */

import { describe, expect, it } from "vitest";
import { computeBlockKeys } from "./index/block-key.js";
import { RadixTreeIndex } from "./index/radix-tree.js";
import { InFlightTracker } from "./load/in-flight.js";
import { LoadTracker } from "./load/load-tracker.js";
import { WorkerRegistry } from "./load/worker-registry.js";
import { PredictedBlocks } from "./predict/predicted-blocks.js";
import { type EngineBlockHash, engineHashFromSafeInt } from "./protocol/engine-hash.js";
import { type WorkerKey, workerKey } from "./protocol/worker.js";
import { RemoteLoadBook } from "./replicas/remote-load-book.js";
import { Router } from "./router.js";
import type { RouteRequest, RouteResult } from "./router-types.js";
import { DEFAULT_SCHEDULER_CONFIG } from "./scheduler/defaults.js";
import type { SchedulerConfig } from "./scheduler/types.js";
import { seededRng } from "./util/rng.js";

const BS = 4;
const FAMILIES = 4;

/** Tokens of prompt family f, `blocks` full blocks plus `tail` tokens. */
function prompt(f: number, blocks: number, tail: number): number[] {
  return Array.from({ length: blocks * BS + tail }, (_, t) => f * 10_000 + t);
}

interface World {
  readonly router: Router;
  readonly inFlight: InFlightTracker;
  readonly loads: LoadTracker;
  readonly index: RadixTreeIndex;
  readonly keys: WorkerKey[];
  readonly book: RemoteLoadBook | null;
  readonly hold: (key: WorkerKey, family: number, blocks: number, medium: string) => void;
  /** The engine evicts the last `blocks` blocks of its latest GPU store of `family`. */
  readonly evict: (key: WorkerKey, family: number, blocks: number) => void;
}

interface Shape {
  readonly seed: number;
  readonly workers: number;
  readonly limit: number;
  readonly config: SchedulerConfig;
  readonly predicted: boolean;
  readonly extra: boolean;
  readonly store: boolean;
  readonly models: boolean;
  /** `maxInFlightPerWorker` (the oldest dropped past it). */
  readonly cap: number | undefined;
}

function randomShape(seed: number): Shape {
  const g = seededRng(seed * 7919 + 1);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(g() * xs.length)]!;
  const config: SchedulerConfig = {
    weights: {
      prefill: pick([1, 1, 0.5]),
      pending: pick([0.05, 0.05, 0, 0.5, 1]),
      decode: pick([0.01, 0, 0.1]),
      queue: pick([2, 0, 8]),
      host: pick([0.15, 0.5]),
      disk: pick([0.4, 1]),
      store: pick([0.5, 0.2, 1]),
    },
    temperature: pick([0, 0, 0, 0.3, 1]),
    outlierStdK: pick([2, 0.5, Infinity]),
    kvHardCap: pick([0.97, 0.6, 0.95, Infinity]),
    stalePolicy: pick(["exclude", "exclude", "penalise"] as const),
    stalePenalty: pick([64, 0, 5]),
  };
  return {
    seed,
    workers: 6 + Math.floor(g() * 60),
    limit: pick([1, 2, 3, 5, 8]),
    config: g() < 0.2 ? DEFAULT_SCHEDULER_CONFIG : config,
    predicted: g() < 0.4,
    extra: g() < 0.3,
    store: g() < 0.3,
    models: g() < 0.3,
    cap: g() < 0.3 ? 1 + Math.floor(g() * 3) : undefined,
  };
}

/** One world from a shape: the same seed builds the same world. */
function world(s: Shape, fullScoring: boolean): World {
  const g = seededRng(s.seed);
  const index = new RadixTreeIndex({ blockSize: BS });
  const registry = new WorkerRegistry();
  const loads = new LoadTracker({ staleAfterMs: 1_000 });
  const inFlight = new InFlightTracker({ prefillTtlMs: 3_000, ttlMs: 9_000 });
  const book = s.extra ? new RemoteLoadBook({ staleAfterMs: 60_000 }) : null;
  const keys: WorkerKey[] = [];
  let hash = 1;
  const gpuStores = new Map<string, EngineBlockHash[]>();
  const hold = (key: WorkerKey, family: number, blocks: number, medium: string) => {
    const blockHashes = Array.from({ length: blocks }, () => engineHashFromSafeInt(hash++));
    if (medium === "GPU") gpuStores.set(`${key}/${family}`, blockHashes);
    index.applyEvent(key, {
      type: "stored",
      blockHashes,
      parentHash: null,
      tokenIds: prompt(family, blocks, 0),
      blockSize: BS,
      loraId: null,
      loraName: null,
      medium,
      tier: medium === "GPU" ? "gpu" : medium === "CPU" ? "host" : "disk",
    });
  };
  if (s.store) {
    const st = registry.upsert({
      workerId: "store",
      url: "http://10.9.9.9:1",
      kind: "mooncake-store",
      blockSize: BS,
      metricsUrl: null,
    });
    hold(st.key, 0, 5, "DISK");
    hold(st.key, 2, 3, "DISK");
  }
  for (let i = 0; i < s.workers; i++) {
    const model = s.models ? [null, "a", "b"][Math.floor(g() * 3)]! : null;
    const capacity = g() < 0.2 ? null : 100 + Math.floor(g() * 900);
    const info = registry.upsert({
      workerId: `w${i}`,
      url: `http://10.0.0.${i}:8000`,
      kind: "vllm",
      blockSize: BS,
      numGpuBlocks: capacity,
      model,
    });
    keys.push(info.key);
    const state = g();
    if (state < 0.1) {
      // Never tracked: unknown.
    } else if (state < 0.15) {
      loads.track(info.key, 0); // pending, no snapshot yet
    } else if (state < 0.2) {
      loads.track(info.key, 0);
      loads.recordFailure(info.key, "refused", 0); // stale from its first failure
    } else {
      // Clustered loads make outliers; a few near full meet the hard cap.
      // Multiples of 0.05 meet the thresholds exactly (0.6, 0.95 caps) now and then.
      const kv = g() < 0.15 ? 0.9 + g() * 0.1 : Math.round(g() * (g() < 0.2 ? 20 : 8)) / 20;
      const at = Math.floor(g() * 50);
      loads.update(
        info.key,
        {
          running: Math.floor(g() * 4),
          waiting: Math.floor(g() * 3),
          kvUsage: kv,
          atMs: at,
          ...(g() < 0.3 ? { numGpuBlocks: 200 + Math.floor(g() * 500) } : {}),
        },
        at,
      );
      if (g() < 0.08) loads.markUnreachable(info.key, "events", "disconnected", at);
    }
    // Holdings: a random family's prefix in a random tier, sometimes two.
    for (let h = 0; h < 2; h++) {
      if (g() < 0.45) {
        const medium = ["GPU", "GPU", "CPU", "DISK"][Math.floor(g() * 4)]!;
        hold(info.key, Math.floor(g() * FAMILIES), 1 + Math.floor(g() * 8), medium);
      }
    }
  }
  const predicted = s.predicted
    ? new PredictedBlocks({ ttlMs: 2_000, maxBlocksPerWorker: 64, degradedTtlMs: 4_000 })
    : undefined;
  const router = new Router({
    index,
    registry,
    loads,
    inFlight,
    config: s.config,
    rng: seededRng(s.seed + 17),
    candidateBreakdownLimit: s.limit,
    fullScoring,
    ...(s.cap === undefined ? {} : { maxInFlightPerWorker: s.cap }),
    ...(s.store ? { storeHolders: [] } : {}),
    ...(predicted === undefined ? {} : { predicted }),
    ...(book === null ? {} : { extraLoad: book }),
  });
  const evict = (key: WorkerKey, family: number, blocks: number) => {
    const held = gpuStores.get(`${key}/${family}`);
    if (held === undefined || held.length === 0) return;
    const gone = held.splice(Math.max(0, held.length - blocks));
    index.applyEvent(key, { type: "removed", blockHashes: gone, medium: "GPU", tier: "gpu" });
  };
  return { router, inFlight, loads, index, keys, book, hold, evict };
}

/** The random operations both worlds are fed, from one generator. */
/** What the last route chose (set by the test loop; both worlds choose the same). */
interface Feedback {
  worker: number | null;
}

function* operations(s: Shape, steps: number, fb: Feedback = { worker: null }) {
  const g = seededRng(s.seed * 31 + 5);
  let now = 50;
  let id = 0;
  const routed: string[] = [];
  const remote: string[] = [];
  // The peers' requests moving on draw from their own stream: the worlds above stay as
  // they were.
  const g2 = seededRng(s.seed * 17 + 3);
  // Engines evicting part of what they reported, from a stream of their own too.
  const g3 = seededRng(s.seed * 13 + 7);
  /** The worker the route being generated excludes as the gateway's retry would. */
  let failed: number | null = null;
  for (let step = 0; step < steps; step++) {
    if (g3() < 0.08) {
      const worker = Math.floor(g3() * s.workers);
      const family = Math.floor(g3() * FAMILIES);
      yield { kind: "evict" as const, worker, family, blocks: 1 + Math.floor(g3() * 6), now };
    }
    const x = g();
    if (x < 0.55) {
      const f = Math.floor(g() * FAMILIES);
      const req: {
        -readonly [K in keyof RouteRequest]: RouteRequest[K];
      } = { tokenIds: prompt(f, Math.floor(g() * 10), Math.floor(g() * BS)), requestId: `r${id}` };
      id++;
      if (s.models && g() < 0.5) req.model = ["a", "b", "c"][Math.floor(g() * 3)]!;
      if (g() < 0.15) {
        const ex = new Set<WorkerKey>();
        for (let k = 0; k < 1 + Math.floor(g() * 5); k++)
          ex.add(workerKey(`w${Math.floor(g() * s.workers)}`, 0));
        // As the gateway's retry does: the worker just chosen (holding the prompt it was
        // sent, predicted or reported) is excluded.
        if (fb.worker !== null && g3() < 0.5) {
          ex.add(workerKey(`w${fb.worker}`, 0));
          failed = fb.worker;
        }
        req.exclude = ex;
      }
      if (g() < 0.15) {
        req.overrides =
          g() < 0.5 ? { temperature: Math.floor(g() * 3) / 2 } : { queue: g() * 4, pending: g() };
      }
      routed.push(req.requestId!);
      yield { kind: "route" as const, req, now };
      // The excluded worker's stream may then reset (its index entries cleared).
      if (failed !== null && g3() < 0.3) {
        yield { kind: "clear" as const, worker: failed, now };
      }
      failed = null;
      // Now and then the chosen worker's engine reports the prompt's full blocks.
      if (fb.worker !== null && g3() < 0.4) {
        const blocks = Math.floor(req.tokenIds.length / BS);
        if (blocks > 0) yield { kind: "store" as const, worker: fb.worker, family: f, blocks, now };
      }
    } else if (x < 0.7 && routed.length > 0) {
      const r = routed[Math.floor(g() * routed.length)]!;
      yield { kind: g() < 0.5 ? ("first" as const) : ("done" as const), id: r, now };
    } else if (x < 0.8) {
      const w = Math.floor(g() * s.workers);
      const kv = g() < 0.1 ? 0.95 : Math.round(g() * 14) / 20;
      yield {
        kind: "load" as const,
        worker: w,
        snapshot: {
          running: Math.floor(g() * 5),
          waiting: Math.floor(g() * 3),
          kvUsage: kv,
          atMs: now - Math.floor(g() * 20),
        },
        now,
      };
    } else if (x < 0.85) {
      const w = Math.floor(g() * s.workers);
      // Most peers' requests carry their prompt's keys (shared as the Redis sync does):
      // the same-prefix queue then counts them.
      const f = Math.floor(g() * FAMILIES);
      const keys =
        g() < 0.7 ? computeBlockKeys(prompt(f, 1 + Math.floor(g() * 9), 0), BS, null) : undefined;
      remote.push(`x${id}`);
      yield {
        kind: "replica" as const,
        worker: w,
        id: `x${id++}`,
        tokens: 1 + Math.floor(g() * 200),
        keys,
        now,
      };
      // Now and then one of the peer's requests moves on (first token, done) or its
      // deadlines pass (sweep): each must reach the column cache as a change.
      if (remote.length > 1 && g2() < 0.6) {
        const y = g2();
        const rid = remote[Math.floor(g2() * remote.length)]!;
        if (y < 0.4) yield { kind: "replica-first" as const, id: rid, now };
        else if (y < 0.8) yield { kind: "replica-done" as const, id: rid, now };
        else yield { kind: "replica-sweep" as const, now };
      }
    } else if (x < 0.88) {
      yield { kind: "unreachable" as const, worker: Math.floor(g() * s.workers), now };
    } else if (x < 0.9) {
      yield { kind: "reachable" as const, worker: Math.floor(g() * s.workers), now };
    } else if (x < 0.91) {
      yield { kind: "fail" as const, worker: Math.floor(g() * s.workers), now };
    } else if (x < 0.915) {
      yield { kind: "remove" as const, worker: Math.floor(g() * s.workers), now };
    } else if (x < 0.925) {
      // The index forgets a worker (its slot is reused once reclaimed) or learns a prefix.
      const worker = Math.floor(g() * s.workers);
      if (g() < 0.5) yield { kind: "clear" as const, worker, now };
      else {
        const family = Math.floor(g() * FAMILIES);
        yield { kind: "store" as const, worker, family, blocks: 1 + Math.floor(g() * 8), now };
      }
    } else {
      // Mostly small steps; now and then past the load staleness or the in-flight TTLs.
      now += Math.floor(g() * (g() < 0.1 ? 4_000 : 60));
    }
  }
}

function apply(
  w: World,
  op: ReturnType<typeof operations> extends Generator<infer T> ? T : never,
): RouteResult | null {
  switch (op.kind) {
    case "route":
      return w.router.route(op.req, op.now);
    case "first":
      w.inFlight.firstToken(op.id, op.now);
      return null;
    case "done":
      w.inFlight.done(op.id, op.now);
      return null;
    case "load":
      w.loads.update(w.keys[op.worker]!, op.snapshot, op.now);
      return null;
    case "replica":
      w.book?.add(
        "B",
        {
          id: op.id,
          worker: w.keys[op.worker]!,
          prefillTokens: op.tokens,
          blocks: 2,
          addedMs: op.now,
          prefillEndMs: op.now + 500,
          expiresMs: op.now + 5_000,
          pending: true,
          ...(op.keys === undefined ? {} : { prefixKeys: op.keys }),
        },
        op.now,
      );
      return null;
    case "replica-first":
      w.book?.firstToken("B", op.id);
      return null;
    case "replica-done":
      w.book?.done("B", op.id, op.now);
      return null;
    case "replica-sweep":
      w.book?.heard("B", 0, op.now);
      w.book?.sweep(op.now);
      return null;
    case "unreachable":
      w.loads.markUnreachable(w.keys[op.worker]!, "scrape", "ECONNREFUSED", op.now);
      return null;
    case "reachable":
      w.loads.markReachable(w.keys[op.worker]!, "scrape");
      return null;
    case "fail":
      w.loads.recordFailure(w.keys[op.worker]!, "timeout", op.now);
      return null;
    case "clear":
      w.index.removeWorker(w.keys[op.worker]!);
      w.index.reclaim(1e9);
      return null;
    case "evict":
      w.evict(w.keys[op.worker]!, op.family, op.blocks);
      return null;
    case "store":
      w.hold(w.keys[op.worker]!, op.family, op.blocks, "GPU");
      return null;
    case "remove":
      // The in-flight side of a removal alone (its handles must be dropped).
      w.inFlight.removeWorker(w.keys[op.worker]!);
      return null;
  }
}

describe("column scoring decides exactly as full scoring", () => {
  it("over random fleets, loads, holdings and configs", () => {
    let routes = 0;
    let columnRoutes = 0;
    let allStale = 0;
    let kvSkipped = 0;
    let excluded = 0;
    const reasons = new Set<string>();
    for (let seed = 1; seed <= 120; seed++) {
      const s = randomShape(seed);
      const fast = world(s, false);
      const full = world(s, true);
      const fb: Feedback = { worker: null };
      for (const op of operations(s, 160, fb)) {
        const a = apply(fast, op);
        const b = apply(full, op);
        if (a === null || b === null) continue;
        fb.worker = a.ok ? fast.keys.indexOf(a.decision.worker) : null;
        routes++;
        expect(a, `seed ${seed}`).toEqual(b);
        if (a.ok) {
          reasons.add(a.decision.reason);
          if (a.decision.fallbacks.allStale) allStale++;
          if (a.decision.fallbacks.kvExclusionSkipped) kvSkipped++;
          if (a.decision.candidates.some((c) => c.excluded !== null)) excluded++;
        }
      }
      const stats = fast.router.columnStats;
      expect({ ...stats, decisions: 0 }, `seed ${seed}`).toEqual({
        decisions: 0,
        fallbacks: 0,
        late: 0,
        auditRepairs: 0, // every change reported: the audit finds nothing to repair
      });
      columnRoutes += stats.decisions;
      expect(full.router.columnStats.decisions).toBe(0);
    }
    // The worlds did exercise the rules (not only trivial decisions).
    expect(routes).toBeGreaterThan(5_000);
    expect(columnRoutes).toBeGreaterThan(routes / 2);
    expect(allStale).toBeGreaterThan(0);
    expect(kvSkipped).toBeGreaterThan(0);
    expect(excluded).toBeGreaterThan(0);
    expect([...reasons].sort()).toEqual([
      "lowest_cost",
      "lowest_cost_tie",
      "only_candidate",
      "sampled",
    ]);
  });
});

describe("the column cache's audit", () => {
  it("finds and repairs a load change no tracker reported", () => {
    const index = new RadixTreeIndex({ blockSize: 4 });
    const registry = new WorkerRegistry();
    const loads = new LoadTracker({ staleAfterMs: 1e9 });
    const inFlight = new InFlightTracker({ prefillTtlMs: 1e8, ttlMs: 1e9 });
    const keys: WorkerKey[] = [];
    for (let i = 0; i < 40; i++) {
      const w = registry.upsert({
        workerId: `w${i}`,
        url: `http://h${i}:1`,
        kind: "vllm",
        blockSize: 4,
        numGpuBlocks: 1000,
      });
      keys.push(w.key);
      loads.update(w.key, { running: 1, waiting: i === 39 ? 30 : 3, kvUsage: 0.5, atMs: 0 }, 0);
    }
    const router = new Router({
      index,
      registry,
      loads,
      inFlight,
      config: DEFAULT_SCHEDULER_CONFIG,
      rng: seededRng(1),
      candidateBreakdownLimit: 4,
    });
    const req = (i: number) => ({ tokenIds: [1, 2, 3, 4, 5, 6, 7, 8], requestId: `r${i}` });
    router.route(req(0), 1);
    inFlight.done("r0", 1);
    // A future mutator that forgets to notify: w39 becomes idle behind the cache's back.
    (loads.handle(keys[39]!) as { snapshot: unknown }).snapshot = {
      running: 0,
      waiting: 0,
      kvUsage: 0,
      atMs: 1,
    };
    let first = -1;
    for (let i = 1; i < 1100 && first < 0; i++) {
      const r = router.route(req(i), 2);
      inFlight.done(`r${i}`, 2);
      if (r.ok && r.decision.worker === keys[39]) first = i;
    }
    // The 1,024th decision recomputes every cached row and finds w39's.
    expect(first).toBe(1023);
    expect(router.columnStats.auditRepairs).toBe(1);
  });
});
