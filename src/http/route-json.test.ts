import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { WorkerKey } from "../protocol/worker.js";
import type { MatchReport, RouteDecision } from "../router.js";
import type { CandidateBreakdown } from "../scheduler/types.js";
import { decisionJson, matchJson, writeDecision, writeMatch } from "./route-json.js";

// Any double (NaN, ±Infinity, -0, subnormals) and any string (quotes, control characters,
// lone surrogates): the writers must agree with JSON.stringify on all of them.
const num = fc.double();
const nullableNum = fc.option(num, { nil: null });
const text = fc.string({ unit: "binary", maxLength: 12 });
const key = text.map((s) => s as WorkerKey);

const candidate: fc.Arbitrary<CandidateBreakdown> = fc.record({
  worker: key,
  overlap: fc.record({ gpu: num, host: num, disk: num, store: num }),
  newPrefillBlocks: num,
  prefillCost: num,
  decodeCost: num,
  queueCost: num,
  stalePenalty: num,
  totalCost: num,
  kvLoad: nullableNum,
  stale: fc.boolean(),
  load: fc.record({
    pendingPrefillTokens: num,
    activeBlocks: num,
    waiting: num,
    running: num,
    kvLoad: nullableNum,
    capacityBlocks: nullableNum,
    basis: fc.constantFrom("scraped+predicted" as const, "predicted" as const),
  }),
  excluded: fc.constantFrom(null, "stale" as const, "kv_hard_cap" as const, "kv_outlier" as const),
  probability: num,
});

const decision: fc.Arbitrary<RouteDecision> = fc.record({
  requestId: text,
  worker: key,
  workerId: text,
  dpRank: num,
  url: text,
  model: fc.option(text, { nil: null }),
  overlapBlocks: num,
  cachedTokens: num,
  promptTokens: num,
  promptBlocks: num,
  blockSize: num,
  prefillTokens: num,
  blocks: num,
  reason: fc.constantFrom(
    "only_candidate" as const,
    "lowest_cost" as const,
    "lowest_cost_tie" as const,
    "sampled" as const,
  ),
  temperature: num,
  fallbacks: fc.record({ allStale: fc.boolean(), kvExclusionSkipped: fc.boolean() }),
  kvMean: nullableNum,
  kvStd: nullableNum,
  candidates: fc.array(candidate, { maxLength: 4 }),
  overlapSources: fc.array(fc.record({ reportedBlocks: num, predictedBlocks: num }), {
    maxLength: 4,
  }),
  timings: fc.record({ hashMs: num, matchMs: num, scoreMs: num }),
});

const match: fc.Arbitrary<MatchReport> = fc.record({
  promptTokens: num,
  promptBlocks: num,
  blockSize: num,
  store: num,
  workers: fc.array(
    fc.record({
      worker: key,
      workerId: text,
      dpRank: num,
      model: fc.option(text, { nil: null }),
      gpu: num,
      host: num,
      disk: num,
      store: num,
      cachedTokens: num,
    }),
    { maxLength: 4 },
  ),
});

describe("route JSON writers", () => {
  it("write exactly JSON.stringify of the decision object", () => {
    fc.assert(
      fc.property(decision, fc.boolean(), (d, flag) => {
        expect(writeDecision(d)).toBe(JSON.stringify(decisionJson(d)));
        // A worker whose stream is catching up is flagged `current: false`.
        const notCurrent = new Set(flag ? d.candidates.slice(0, 1).map((c) => c.worker) : []);
        expect(writeDecision(d, notCurrent)).toBe(JSON.stringify(decisionJson(d, notCurrent)));
      }),
      { numRuns: 300 },
    );
  });

  it("write exactly JSON.stringify of the match object", () => {
    fc.assert(
      fc.property(match, fc.boolean(), (m, flag) => {
        expect(writeMatch(m)).toBe(JSON.stringify(matchJson(m)));
        const notCurrent = new Set(flag ? m.workers.slice(0, 1).map((w) => w.worker) : []);
        expect(writeMatch(m, notCurrent)).toBe(JSON.stringify(matchJson(m, notCurrent)));
      }),
      { numRuns: 300 },
    );
  });

  it("write valid JSON for an empty candidate list", () => {
    const d = fc.sample(decision, { numRuns: 1, seed: 7 })[0]!;
    const text = writeDecision({ ...d, candidates: [] });
    expect(JSON.parse(text).candidates).toEqual([]);
  });
});
