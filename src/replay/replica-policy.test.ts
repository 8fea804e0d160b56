import { describe, expect, it } from "vitest";
import { resolveSchedulerConfig } from "../scheduler/config.js";
import { comparePolicies } from "./compare.js";
import { parseReplayArgs, ReplayUsageError } from "./options.js";
import { type ReplicaSyncModel, ReplicatedKvPolicy } from "./replica-policy.js";
import { runReplay, unlimitedBlocks } from "./run-replay.js";
import { DEFAULT_TIMING } from "./timing-model.js";
import { parseTrace, type TraceRequest } from "./trace.js";
import { defaultParams, generateWorkload, toJsonl } from "./workloads/generators.js";

const config = resolveSchedulerConfig({});

/** Request `i`: a prompt of its own (no prefix shared), arriving at `atMs`. */
const req = (i: number, atMs: number): TraceRequest => ({
  index: i,
  arrivalMs: atMs,
  inputLength: 2048,
  outputLength: 100,
  hashIds: [1000 + 4 * i, 1001 + 4 * i, 1002 + 4 * i, 1003 + 4 * i],
});
const tokens = (i: number) => Array.from({ length: 2048 }, (_, k) => i * 10_000 + k);

function policy(m: Partial<ReplicaSyncModel>) {
  return new ReplicatedKvPolicy({
    replicas: 2,
    sync: true,
    syncP50Ms: 1,
    syncP99Ms: 10,
    ...m,
    workers: 2,
    blockSize: 16,
    capacityBlocks: 10_000,
    config,
    seed: 7,
  });
}

/**
 * Pairs of cold requests 100 ms apart, the first to replica r0, the second to r1, on two
 * idle workers: a replica that knows the other's pending prefill sends the second
 * elsewhere. Returns how many pairs landed on one worker.
 */
function collisions(p: ReplicatedKvPolicy, pairs: number): number {
  let same = 0;
  for (let k = 0; k < pairs; k++) {
    const t = k * 60_000; // every earlier request is long done (reported below)
    const a = p.choose(req(2 * k, t), tokens(2 * k), t);
    const b = p.choose(req(2 * k + 1, t + 100), tokens(2 * k + 1), t + 100);
    if (a === b) same++;
    for (const i of [2 * k, 2 * k + 1]) {
      const o = { index: i } as Parameters<ReplicatedKvPolicy["onDone"]>[0];
      p.onFirstToken(o, t + 30_000);
      p.onDone(o, t + 30_000);
    }
  }
  return same;
}

describe("kv as router replicas", () => {
  it("with sync on, a replica sees the other's routed requests after the delay; off, never", () => {
    expect(collisions(policy({ sync: true }), 40)).toBe(0);
    // Each replica alone sees two idle workers for every first request: same choice.
    expect(collisions(policy({ sync: false }), 40)).toBeGreaterThan(10);
    // A delay longer than the gap hides the first decision, as off does.
    expect(collisions(policy({ sync: true, syncP50Ms: 500, syncP99Ms: 500 }), 40)).toBeGreaterThan(
      10,
    );
    const d = policy({ syncP50Ms: 2, syncP99Ms: 40 });
    collisions(d, 200);
    const s = d.delayStats();
    expect(s.messages).toBe(200 * 2 * 3); // add, first token, done; each to one peer
    expect(s.p50Ms).toBeGreaterThan(1.5);
    expect(s.p50Ms).toBeLessThan(2.7);
    expect(s.p99Ms).toBeGreaterThan(15);
  });

  it("one replica is the plain kv run", () => {
    const requests = Array.from({ length: 60 }, (_, i) => req(i % 20, i * 50)).map((r, i) => ({
      ...r,
      index: i,
    }));
    const base = {
      workers: 4,
      capacityBlocks: null,
      blockSize: 16,
      timing: DEFAULT_TIMING,
      seed: 3,
      eventDelayMs: 5,
      scrapeIntervalMs: 1000,
      policies: ["kv_nopredict"] as const,
      scheduler: config,
      reference: false,
    };
    const one = comparePolicies(requests, base)[0]!;
    const p = new ReplicatedKvPolicy({
      replicas: 1,
      sync: true,
      syncP50Ms: 1,
      syncP99Ms: 50,
      workers: 4,
      blockSize: 16,
      capacityBlocks: 1 + requests.reduce((s, r) => s + Math.ceil(r.inputLength / 16), 0),
      config,
      seed: 3,
    });
    expect(runReplay(requests, () => p, base).summary).toEqual(one.summary);
    // More replicas go through compare's kv case (the CLI's path).
    const two = comparePolicies(requests, {
      ...base,
      replicaSync: { replicas: 2, sync: false, syncP50Ms: 0, syncP99Ms: 0 },
    })[0]!;
    expect(two.summary).not.toEqual(one.summary);
  });

  it("with a zero sync delay, any number of replicas routes exactly as one router", () => {
    // Multi-turn chat at ~60 % load: prefixes queue on their holders, so the spreading
    // rule's same-prefix demand decides placements. Every replica must count the other
    // replicas' queued requests that share a prompt's prefix as the one router does
    // (their prefix keys travel with the shared entries); counted as unrelated load, 2
    // replicas here gave +1.4 % mean TTFT at zero delay and +12 % with 4 at 0.01 ms.
    const lines = generateWorkload("chat", { ...defaultParams("chat"), requests: 800, rate: 100 });
    const requests = parseTrace(toJsonl(lines));
    const base = {
      workers: 8,
      capacityBlocks: null,
      blockSize: 16,
      timing: DEFAULT_TIMING,
      seed: 1,
      eventDelayMs: 5,
      scrapeIntervalMs: 1000,
      policies: ["kv_nopredict"] as const,
      scheduler: config,
      reference: false,
    };
    // Replicas break ties with their own random draws, so idle workers may swap roles:
    // compare what does not depend on the workers' names.
    const view = (s: ReturnType<typeof comparePolicies>[number]["summary"]) => ({
      ...s,
      perWorkerPrefillTokens: [...s.perWorkerPrefillTokens].sort((a, b) => a - b),
      prefillUtilisation: s.prefillUtilisation.toFixed(9),
    });
    const exact = comparePolicies(requests, base)[0]!.summary;
    const one = view(exact);
    for (const replicas of [2, 4]) {
      const many = comparePolicies(requests, {
        ...base,
        replicaSync: { replicas, sync: true, syncP50Ms: 0, syncP99Ms: 0 },
      })[0]!.summary;
      expect({ replicas, ...view(many) }).toEqual({ replicas, ...one });
      // Drawing their tie-breaks from the one router's single stream, the replicas make
      // its decisions exactly: the sync model adds nothing, only the draws differ.
      const shared = new ReplicatedKvPolicy({
        replicas,
        sync: true,
        syncP50Ms: 0,
        syncP99Ms: 0,
        workers: 8,
        blockSize: 16,
        capacityBlocks: unlimitedBlocks(requests, 16),
        config,
        seed: 1,
        sharedRng: true,
      });
      expect({ replicas, ...runReplay(requests, () => shared, base).summary }).toEqual({
        replicas,
        ...exact,
      });
    }
  });

  it("parses --replicas and --replica-sync, naming a bad flag", () => {
    const o = parseReplayArgs(["--replicas", "4", "--replica-sync", "off"])!;
    expect(o.replicaSync).toEqual({ replicas: 4, sync: false, syncP50Ms: 1, syncP99Ms: 50 });
    expect(parseReplayArgs([])!.replicaSync.replicas).toBe(1);
    expect(parseReplayArgs(["--replica-sync-p99-ms", "0"])!.replicaSync).toMatchObject({
      syncP50Ms: 0,
      syncP99Ms: 0,
    });
    const bad = (args: string[]) => () => parseReplayArgs(args);
    expect(bad(["--replicas", "0"])).toThrow(ReplayUsageError);
    expect(bad(["--replica-sync", "maybe"])).toThrow("--replica-sync must be on or off");
    expect(bad(["--replica-sync-p50-ms", "5", "--replica-sync-p99-ms", "2"])).toThrow(
      "--replica-sync-p99-ms (2) must not be below",
    );
    expect(bad(["--replicas", "2", "--predict-ttl-ms", "100"])).toThrow(ReplayUsageError);
  });
});
