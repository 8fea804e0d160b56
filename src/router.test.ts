import { describe, expect, it } from "vitest";
import { computeBlockKeys } from "./index/block-key.js";
import type {
  BlockKeySeq,
  IndexStats,
  MatchResult,
  PrefixIndex,
  WorkerMatch,
} from "./index/types.js";
import { InFlightTracker } from "./load/in-flight.js";
import { LoadTracker } from "./load/load-tracker.js";
import { WorkerRegistry } from "./load/worker-registry.js";
import { modelChain } from "./protocol/store-model.js";
import { type WorkerKey, workerKey } from "./protocol/worker.js";
import { Router, type RouterDeps } from "./router.js";
import { resolveSchedulerConfig } from "./scheduler/config.js";

const BS = 4;

/**
 * A brute-force PrefixIndex for the router's tests: per worker and tier, the set of
 * block keys it holds, put there directly from token sequences.
 */
class SetIndex implements PrefixIndex {
  readonly blockSize = BS;
  readonly held = new Map<WorkerKey, { gpu: Set<string>; host: Set<string>; disk: Set<string> }>();
  lookups = 0;

  hold(
    worker: WorkerKey,
    tokens: number[],
    tier: "gpu" | "host" | "disk" = "gpu",
    chain: string | null = null,
  ): void {
    const keys = computeBlockKeys(tokens, BS, chain);
    let h = this.held.get(worker);
    if (h === undefined) {
      h = { gpu: new Set(), host: new Set(), disk: new Set() };
      this.held.set(worker, h);
    }
    for (let i = 0; i < keys.length; i += 2) h[tier].add(`${keys[i]}:${keys[i + 1]}`);
  }

  applyEvent(): never {
    throw new Error("not used by the router");
  }
  removeWorker(worker: WorkerKey): void {
    this.held.delete(worker);
  }
  findMatches(keys: BlockKeySeq): MatchResult {
    this.lookups++;
    const workers: WorkerMatch[] = [];
    for (const [worker, h] of this.held) {
      const count = (has: (k: string) => boolean) => {
        let n = 0;
        while (2 * n < keys.length && has(`${keys[2 * n]}:${keys[2 * n + 1]}`)) n++;
        return n;
      };
      workers.push({
        worker,
        gpu: count((k) => h.gpu.has(k)),
        host: count((k) => h.gpu.has(k) || h.host.has(k)),
        disk: count((k) => h.gpu.has(k) || h.host.has(k) || h.disk.has(k)),
        totalBlocks: h.gpu.size + h.host.size + h.disk.size,
      });
    }
    return { blocks: keys.length / 2, workers };
  }
  stats(): IndexStats {
    return {
      nodes: 0,
      workers: this.held.size,
      workerBlocks: 0,
      outcomes: {},
      reclaimPendingBlocks: 0,
      capEvictions: 0,
      overflowResets: 0,
    };
  }
}

const prompt = (n: number, seed = 1) => Array.from({ length: n }, (_, i) => seed * 1000 + i);

function setup(over: Partial<RouterDeps> = {}) {
  const index = new SetIndex();
  const registry = new WorkerRegistry();
  const loads = new LoadTracker({ staleAfterMs: 1000 });
  const inFlight = new InFlightTracker({ prefillTtlMs: 10_000, ttlMs: 60_000 });
  let tick = 0;
  const router = new Router({
    index,
    registry,
    loads,
    inFlight,
    config: resolveSchedulerConfig({ weights: { queue: 0 }, outlierStdK: Infinity }),
    rng: () => 0,
    clock: () => tick++,
    ...over,
  });
  const add = (
    id: string,
    extra: { model?: string; dpRank?: number; numGpuBlocks?: number } = {},
  ) =>
    registry.upsert({
      workerId: id,
      url: `http://127.0.0.1:9/${id}`,
      kind: "vllm",
      blockSize: BS,
      ...extra,
    }).key;
  return { index, registry, loads, inFlight, router, add };
}

describe("Router.route", () => {
  it("routes to the worker holding the prefix and records the request in flight", () => {
    const { index, router, inFlight, add } = setup();
    const a = add("a");
    const b = add("b", { dpRank: 1 });
    index.hold(b, prompt(24));
    const r = router.route({ tokenIds: prompt(40) }, 100);
    if (!r.ok) throw new Error(r.error.message);
    const d = r.decision;
    expect(d).toMatchObject({
      requestId: expect.stringMatching(/^kvr-[0-9a-f]{32}$/),
      worker: b,
      workerId: "b",
      dpRank: 1,
      url: "http://127.0.0.1:9/b",
      overlapBlocks: 6,
      cachedTokens: 24,
      promptTokens: 40,
      promptBlocks: 10,
      blockSize: BS,
      prefillTokens: 16,
      blocks: 10,
      reason: "lowest_cost",
    });
    expect(d.candidates.map((c) => c.worker)).toEqual([a, b]);
    expect(d.timings).toEqual({ hashMs: 1, matchMs: 1, scoreMs: 1 });
    expect(inFlight.totals(b)).toMatchObject({ pendingPrefillTokens: 16, activeBlocks: 10 });
    expect(inFlight.totals(a).activeRequests).toBe(0);
  });

  it("leaves the holder for its prefix's own demand, not for other prefixes' queue", () => {
    // b holds a 200-token (50-block) history; a is idle. 100 blocks of prefill are queued
    // on b; the request recomputes 51 blocks on a, 1 on b.
    for (const shared of [false, true]) {
      const { index, router, inFlight, add } = setup();
      const a = add("a");
      const b = add("b");
      index.hold(b, prompt(200));
      const queued = shared ? [...prompt(200), ...prompt(400, 7)] : prompt(600, 3);
      inFlight.add("queued", b, {
        prefillTokens: 400,
        blocks: 150,
        nowMs: 0,
        prefixKeys: computeBlockKeys(queued, BS, null),
      });
      const r = router.route({ tokenIds: prompt(204) }, 100);
      if (!r.ok) throw new Error(r.error.message);
      // Another conversation's prefill: 100 blocks < 9 × 50 saved, stay with the cache.
      // The same history's demand (e.g. a burst of siblings): a second holder.
      expect(r.decision.worker).toBe(shared ? a : b);
      const onB = r.decision.candidates.find((c) => c.worker === b)!;
      expect(onB.overlap.gpu).toBe(50);
    }
  });

  it("never chooses an excluded worker, even the one holding the prefix", () => {
    const { index, router, inFlight, add } = setup();
    const a = add("a");
    const b = add("b");
    index.hold(b, prompt(24));
    const r = router.route({ tokenIds: prompt(40), exclude: new Set([b]) }, 100);
    if (!r.ok) throw new Error(r.error.message);
    expect(r.decision.worker).toBe(a);
    expect(r.decision.candidates.map((c) => c.worker)).toEqual([a]);
    const none = router.route({ tokenIds: prompt(40), exclude: new Set([a, b]) }, 100);
    expect(none.ok ? null : none.error.code).toBe("all_excluded");
    expect(inFlight.size).toBe(1);
  });

  it("spreads identical cold requests using the in-flight predictions", () => {
    const { router, inFlight, add } = setup();
    const a = add("a");
    const b = add("b");
    const first = router.route({ tokenIds: prompt(40), requestId: "r1" }, 0);
    const second = router.route({ tokenIds: prompt(40, 2), requestId: "r2" }, 1);
    expect(first.ok && first.decision.worker).toBe(a);
    expect(second.ok && second.decision.worker).toBe(b);
    // Reports free the load again.
    expect(inFlight.done("r1", 2).ok).toBe(true);
    const third = router.route({ tokenIds: prompt(40, 3) }, 3);
    expect(third.ok && third.decision.worker).toBe(a);
  });

  it("combines scraped load with requests routed after the scrape", () => {
    const { router, loads, add } = setup();
    const a = add("a", { numGpuBlocks: 1000 });
    const b = add("b", { numGpuBlocks: 1000 });
    loads.update(a, { running: 5, waiting: 0, kvUsage: 0.05, atMs: 0 }, 0);
    loads.update(b, { running: 0, waiting: 0, kvUsage: 0.0, atMs: 0 }, 0);
    // a holds 50 scraped active blocks; b is idle. Each request routed after the scrape
    // adds 10 pending-prefill blocks and 10 active blocks to its worker, and costs 10
    // blocks of new prefill: a = 10 + 50 + 20·n_a, b = 10 + 20·n_b (with the pending and
    // decode weights pinned at 1, whatever the tuned defaults are).
    const chosen: string[] = [];
    const overrides = { pending: 1, decode: 1 };
    for (let i = 0; i < 7; i++) {
      const r = router.route({ tokenIds: prompt(40, i + 10), overrides }, 10 + i);
      if (!r.ok) throw new Error(r.error.message);
      chosen.push(r.decision.workerId);
    }
    expect(chosen).toEqual(["b", "b", "b", "a", "b", "a", "b"]);
    const d = router.route({ tokenIds: prompt(40, 99) }, 20);
    if (!d.ok) throw new Error(d.error.message);
    const cb = d.decision.candidates.find((c) => c.worker === b);
    expect(cb?.load.basis).toBe("scraped+predicted");
  });

  it("filters by model", () => {
    const { router, add } = setup();
    add("a", { model: "m1" });
    const b = add("b", { model: "m2" });
    const r = router.route({ tokenIds: prompt(8), model: "m2" }, 0);
    expect(r.ok && r.decision.worker).toBe(b);
    expect(r.ok && r.decision.candidates.length).toBe(1);
    const none = router.route({ tokenIds: prompt(8), model: "m3" }, 0);
    expect(none).toMatchObject({ ok: false, error: { code: "no_workers_for_model" } });
  });

  it("fails clearly without workers, on duplicate ids and on bad overrides", () => {
    const { router, add } = setup();
    expect(router.route({ tokenIds: prompt(8) }, 0)).toMatchObject({
      ok: false,
      error: { code: "no_workers" },
    });
    add("a");
    expect(router.route({ tokenIds: prompt(8), requestId: "x" }, 0).ok).toBe(true);
    expect(router.route({ tokenIds: prompt(8), requestId: "x" }, 0)).toMatchObject({
      ok: false,
      error: { code: "duplicate_request_id" },
    });
    const bad = router.route({ tokenIds: prompt(8), overrides: { temperature: -1 } }, 0);
    expect(bad).toMatchObject({ ok: false, error: { code: "invalid_overrides" } });
    expect(!bad.ok && bad.error.message).toContain("overrides.temperature");
  });

  it("lets a request id be reused once its request expired by TTL", () => {
    const { router, add } = setup();
    add("a");
    expect(router.route({ tokenIds: prompt(8), requestId: "x" }, 0).ok).toBe(true);
    expect(router.route({ tokenIds: prompt(8), requestId: "x" }, 59_999).ok).toBe(false);
    const reused = router.route({ tokenIds: prompt(8), requestId: "x" }, 60_000);
    expect(reused.ok).toBe(true);
  });

  it("applies per-request overrides", () => {
    const { router, index, add } = setup();
    const a = add("a");
    add("b");
    index.hold(a, prompt(40), "disk");
    // disk weight 0.4: a costs 4, b 10.
    const r = router.route({ tokenIds: prompt(40) }, 0);
    expect(r.ok && r.decision.worker).toBe(a);
    const o = router.route({ tokenIds: prompt(40), overrides: { disk: 1, prefill: 1 } }, 1);
    // disk = 1 makes both cost 10 + a's in-flight 10 blocks: b wins
    expect(o.ok && o.decision.workerId).toBe("b");
  });

  it("excludes a stale worker while others are fresh", () => {
    const { router, loads, index, add } = setup();
    const a = add("a");
    const b = add("b");
    index.hold(a, prompt(40));
    loads.update(a, { running: 0, waiting: 0, kvUsage: 0, atMs: 0 }, 0);
    loads.update(b, { running: 0, waiting: 0, kvUsage: 0, atMs: 1500 }, 1500);
    const r = router.route({ tokenIds: prompt(40) }, 2000);
    if (!r.ok) throw new Error(r.error.message);
    expect(r.decision.worker).toBe(b);
    expect(r.decision.candidates[0]).toMatchObject({ stale: true, excluded: "stale" });
  });

  it("sends nothing to a just-added worker whose scrapes have only failed", () => {
    const { router, loads, add } = setup();
    const busy = add("busy", { numGpuBlocks: 1000 });
    const down = add("down", { numGpuBlocks: 1000 });
    loads.update(busy, { running: 8, waiting: 4, kvUsage: 0.6, atMs: 0 }, 0);
    loads.track(down, 0);
    loads.recordFailure(down, "ECONNREFUSED", 10);
    for (let i = 0; i < 20; i++) {
      const r = router.route({ tokenIds: prompt(40, i) }, 20 + i);
      if (!r.ok) throw new Error(r.error.message);
      expect(r.decision.worker).toBe(busy);
      expect(r.decision.candidates[1]).toMatchObject({ stale: true, excluded: "stale" });
    }
  });

  it("counts blocks held by a shared store", () => {
    const { router, index, registry, add } = setup();
    add("a");
    add("b");
    registry.upsert({
      workerId: "store:mc",
      url: "http://127.0.0.1:9",
      kind: "mooncake-store",
      blockSize: BS,
    });
    index.hold(workerKey("store:mc"), prompt(40), "disk");
    const r = router.route({ tokenIds: prompt(40) }, 0);
    if (!r.ok) throw new Error(r.error.message);
    expect(r.decision.candidates.map((c) => c.overlap.store)).toEqual([10, 10]);
    expect(r.decision.candidates.map((c) => c.worker)).not.toContain("store:mc#0");
    // 10 blocks at the store weight 0.5
    expect(r.decision.candidates[0]!.newPrefillBlocks).toBe(5);
  });

  it("counts a shared store only for the model it serves", () => {
    // A store's blocks are one model's KV: the same tokens under another model are a miss.
    // Held on the plain chain: stored without a model_name (the configured model's, or
    // unknown when the store names none).
    const { router, index, registry, add } = setup();
    add("a", { model: "m1" });
    add("b", { model: "m2" });
    for (const [id, model] of [
      ["store:m1", "m1"],
      ["store:any", null],
    ] as const) {
      registry.upsert({
        workerId: id,
        url: "http://127.0.0.1:9",
        kind: "mooncake-store",
        blockSize: BS,
        model,
      });
    }
    index.hold(workerKey("store:m1"), prompt(40), "disk");
    index.hold(workerKey("store:any"), prompt(16), "disk");
    const store = (model: string | undefined, tokens = prompt(40)) => {
      const r = router.route({ tokenIds: tokens, ...(model === undefined ? {} : { model }) }, 0);
      if (!r.ok) throw new Error(r.error.message);
      return r.decision.candidates.map((c) => c.overlap.store);
    };
    expect(store("m1")).toEqual([10]);
    // Unknown model: no request naming a model gets it.
    expect(store("m2")).toEqual([0]);
    // Naming none in a fleet of m1 and m2 (it may run on b): only the unknown-model blocks.
    expect(store(undefined)).toEqual([4, 4]);
    expect(router.match({ tokenIds: prompt(40), model: "m2" }).store).toBe(0);
    expect(router.match({ tokenIds: prompt(40), model: "m1" }).store).toBe(10);
    // Blocks stored for m2 (their own chain): m2's requests only, wherever they are held.
    index.hold(workerKey("store:any"), prompt(24), "disk", modelChain("m2", null));
    index.hold(workerKey("store:m1"), prompt(32), "disk", modelChain("m2", null));
    expect(store("m2")).toEqual([6]);
    expect(store("m1")).toEqual([10]);
    expect(store(undefined)).toEqual([4, 4]);
    // A LoRA or salted request is another chain under the model too.
    expect(router.match({ tokenIds: prompt(40), model: "m2", cacheSalt: "s" }).store).toBe(0);
  });

  it("reads a request naming no model as the fleet's model when every engine names it", () => {
    const { router, index, registry, add } = setup();
    add("a", { model: "m" });
    add("b", { model: "m" });
    registry.upsert({
      workerId: "store:mc",
      url: "http://127.0.0.1:9",
      kind: "mooncake-store",
      blockSize: BS,
    });
    index.hold(workerKey("store:mc"), prompt(40), "disk", modelChain("m", null));
    index.hold(workerKey("store:mc"), prompt(40, 2), "disk", modelChain("other", null));
    expect(router.match({ tokenIds: prompt(40) }).store).toBe(10);
    expect(router.match({ tokenIds: prompt(40, 2) }).store).toBe(0);
    add("c"); // serves any model: a request naming none may run as another
    expect(router.match({ tokenIds: prompt(40) }).store).toBe(0);
    expect(router.match({ tokenIds: prompt(40), model: "m" }).store).toBe(10);
  });
});

describe("Router.match", () => {
  it("reports overlap per worker and tier without side effects", () => {
    const { router, index, inFlight, add } = setup();
    const a = add("a", { model: "m" });
    const b = add("b", { model: "m" });
    index.hold(a, prompt(8));
    index.hold(a, prompt(16), "host");
    const m = router.match({ tokenIds: prompt(18), model: "m" });
    expect(m).toEqual({
      promptTokens: 18,
      promptBlocks: 4,
      blockSize: BS,
      store: 0,
      workers: [
        {
          worker: a,
          workerId: "a",
          dpRank: 0,
          model: "m",
          gpu: 2,
          host: 4,
          disk: 4,
          store: 0,
          cachedTokens: 8,
        },
        {
          worker: b,
          workerId: "b",
          dpRank: 0,
          model: "m",
          gpu: 0,
          host: 0,
          disk: 0,
          store: 0,
          cachedTokens: 0,
        },
      ],
    });
    expect(inFlight.size).toBe(0);
  });
});

describe("Router: callers that never report", () => {
  it("generates unguessable request ids (128 random bits)", () => {
    const { router, add } = setup();
    add("a");
    const ids = new Set<string>();
    for (let i = 0; i < 50; i++) {
      const r = router.route({ tokenIds: prompt(8, i) }, 100);
      if (!r.ok) throw new Error(r.error.message);
      expect(r.decision.requestId).toMatch(/^kvr-[0-9a-f]{32}$/);
      ids.add(r.decision.requestId);
    }
    expect(ids.size).toBe(50);
  });

  it("caps in-flight records per worker, dropping and counting the oldest", () => {
    const { router, inFlight, add } = setup({ maxInFlightPerWorker: 3 });
    const a = add("a");
    for (let i = 0; i < 5; i++) {
      expect(router.route({ tokenIds: prompt(8), requestId: `r${i}` }, 100 + i).ok).toBe(true);
    }
    expect(inFlight.totals(a).activeRequests).toBe(3);
    expect(router.droppedInFlight).toBe(2);
    expect(["r0", "r1", "r2", "r3", "r4"].map((id) => inFlight.has(id))).toEqual([
      false,
      false,
      true,
      true,
      true,
    ]);
  });

  it("unreported predictions alone never exclude the worker holding the prefix", () => {
    // Default exclusion rules (hard cap 0.97, outliers at mean + 2 std).
    const { router, loads, add, index } = setup({ config: resolveSchedulerConfig({}) });
    const a = add("a", { numGpuBlocks: 100 });
    const b = add("b", { numGpuBlocks: 100 });
    const p = prompt(40);
    index.hold(a, p);
    for (const k of [a, b]) {
      loads.update(k, { running: 0, waiting: 0, kvUsage: 0.1, numGpuBlocks: 100, atMs: 50 }, 50);
    }
    // An attacker routes the same prompt 30 times and never sends or reports it:
    // 30 × 10 predicted blocks on a, three times its capacity.
    for (let i = 0; i < 30; i++) {
      const r = router.route({ tokenIds: p, requestId: `ghost-${i}` }, 100);
      if (!r.ok) throw new Error(r.error.message);
    }
    const r = router.route({ tokenIds: p, requestId: "honest" }, 100);
    if (!r.ok) throw new Error(r.error.message);
    const ca = r.decision.candidates.find((c) => c.worker === a)!;
    expect(ca.kvLoad).toBeGreaterThan(1); // the prediction is visible in the cost…
    expect(ca.excluded).toBeNull(); // …but cannot exclude a on its own (before: kv_hard_cap)
    // The next scrape shows none of them: a wins its prefix back.
    loads.update(a, { running: 0, waiting: 0, kvUsage: 0.1, numGpuBlocks: 100, atMs: 120 }, 120);
    const back = router.route({ tokenIds: p, requestId: "honest-2" }, 130);
    expect(back.ok && back.decision.worker).toBe(a);
    // The engine's own figure still excludes.
    loads.update(a, { running: 9, waiting: 9, kvUsage: 0.99, numGpuBlocks: 100, atMs: 150 }, 150);
    const full = router.route({ tokenIds: p, requestId: "after-scrape" }, 200);
    if (!full.ok) throw new Error(full.error.message);
    expect(full.decision.candidates.find((c) => c.worker === a)!.excluded).toBe("kv_hard_cap");
    expect(full.decision.worker).toBe(b);
  });
});

describe("Router predict-on-route", () => {
  it("sends a second request with the same new prefix to the first one's worker before any event, shown apart", async () => {
    const { PredictedBlocks } = await import("./predict/predicted-blocks.js");
    const predicted = new PredictedBlocks({
      ttlMs: 2000,
      maxBlocksPerWorker: 1000,
      degradedTtlMs: 0,
    });
    const { router, index, add } = setup({
      predicted,
      config: resolveSchedulerConfig({ weights: { queue: 0, decode: 0 }, outlierStdK: Infinity }),
    });
    const a = add("a");
    const b = add("b");
    const first = router.route({ tokenIds: prompt(40) }, 0);
    if (!first.ok) throw new Error(first.error.message);
    const other = first.decision.worker === a ? b : a;
    const second = router.route({ tokenIds: prompt(48) }, 500);
    if (!second.ok) throw new Error(second.error.message);
    expect(second.decision.worker).toBe(first.decision.worker);
    expect(second.decision.overlapBlocks).toBe(10);
    const i = second.decision.candidates.findIndex((c) => c.worker === first.decision.worker);
    expect(second.decision.overlapSources?.[i]).toEqual({ reportedBlocks: 0, predictedBlocks: 10 });
    // /v1/match reports the engines' view only.
    expect(router.match({ tokenIds: prompt(48) }).workers.every((w) => w.gpu === 0)).toBe(true);
    // Past the TTL the prediction is gone (the second request renewed it at 500 ms).
    const late = router.route({ tokenIds: prompt(48, 2) }, 2600);
    expect(late.ok && late.decision.overlapSources?.every((s) => s.predictedBlocks === 0)).toBe(
      true,
    );
    const third = router.route({ tokenIds: prompt(48) }, 2600);
    if (!third.ok) throw new Error(third.error.message);
    expect(third.decision.overlapSources?.every((s) => s.predictedBlocks === 0)).toBe(true);
    // The engine confirms on the other worker: the index's entries count, predictions go.
    index.hold(other, prompt(48));
    const fourth = router.route({ tokenIds: prompt(48) }, 2700);
    if (!fourth.ok) throw new Error(fourth.error.message);
    expect(fourth.decision.worker).toBe(other);
    expect(predicted.stats().blocks).toBeLessThanOrEqual(12 + 12);
  });
});

describe("Router predict-on-route past a reported shared prefix", () => {
  // Agents share a 6-block system prompt the engine of `a` reported; each task's steps
  // extend the task's own context. A request adding less than a block to the system
  // prompt (all of it reported: nothing recorded) confirms the shared head's predictions;
  // the first task's next step must still see its context predicted on `a`.
  const system = prompt(24, 7);
  const task = (own: number, seed: number) => [...system, ...prompt(own, seed)];
  for (const [path, limit] of [
    ["every candidate scored", 100],
    ["columns", 1],
  ] as const) {
    it(`counts the predicted context beyond the reported system prompt (${path})`, async () => {
      const { PredictedBlocks } = await import("./predict/predicted-blocks.js");
      const predicted = new PredictedBlocks({
        ttlMs: 2000,
        maxBlocksPerWorker: 1000,
        degradedTtlMs: 0,
      });
      const { router, index, inFlight, add } = setup({
        predicted,
        candidateBreakdownLimit: limit,
        config: resolveSchedulerConfig({ weights: { queue: 0, decode: 0 }, outlierStdK: Infinity }),
      });
      const a = add("a");
      add("b");
      index.hold(a, system);
      const step1 = router.route({ tokenIds: task(40, 1) }, 0);
      expect(step1.ok && step1.decision.worker).toBe(a);
      // Each step ends before the next is sent, as an agent's do.
      if (step1.ok) inFlight.done(step1.decision.requestId, 50);
      const other = router.route({ tokenIds: task(3, 2) }, 100);
      expect(other.ok && [other.decision.worker, other.decision.overlapBlocks]).toEqual([a, 6]);
      const step2 = router.route({ tokenIds: task(60, 1) }, 200);
      if (!step2.ok) throw new Error(step2.error.message);
      expect(step2.decision.worker).toBe(a);
      expect(step2.decision.overlapBlocks).toBe(16);
      const i = step2.decision.candidates.findIndex((c) => c.worker === a);
      expect(step2.decision.overlapSources?.[i]).toEqual({
        reportedBlocks: 6,
        predictedBlocks: 16,
      });
      expect(router.columnStats.decisions).toBe(limit === 1 ? 3 : 0);
    });
  }
});

describe("Router with the workers' prefill rate (inFlight.prefillTokensPerSec)", () => {
  // a computes 1,000 tokens routed at 0 ms (an idle worker: it started then); b has 400
  // routed at 900 ms. At 950 ms, at 1 token/ms: a has 50 left, b 350.
  const route = (over: Partial<RouterDeps>) => {
    const { router, inFlight, add } = setup({ candidateBreakdownLimit: 1, ...over });
    const a = add("a");
    const b = add("b");
    inFlight.add("x", a, { prefillTokens: 1000, blocks: 1, nowMs: 0 });
    inFlight.add("y", b, { prefillTokens: 400, blocks: 1, nowMs: 900 });
    const r = router.route({ tokenIds: prompt(32) }, 950);
    if (!r.ok) throw new Error(r.error.message);
    return { worker: r.decision.worker, a, b, columns: router.columnStats.decisions };
  };

  it("counts a prefill in progress by what is left of it, scoring every candidate in full", () => {
    const r = route({ prefillTokensPerSec: 1000 });
    expect(r.worker).toBe(r.a);
    expect(r.columns).toBe(0);
  });

  it("without it, counts the whole prefill (and a field above the breakdown uses columns)", () => {
    const r = route({});
    expect(r.worker).toBe(r.b);
    expect(r.columns).toBe(1);
  });
});
