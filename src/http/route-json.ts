/**
 * The public JSON of `POST /v1/route` and `POST /v1/match` (snake_case, documented in
 * docs/http-api.md), in two forms. `decisionJson`/`matchJson` build the object: the
 * readable definition of the body. `writeDecision`/`writeMatch` write the same text
 * straight from the router's result, without the ~70 intermediate objects of a 16-worker
 * decision and about 40 % faster than `JSON.stringify` of the object (the route's hot
 * path). Their output is byte-identical to `JSON.stringify` of the object, non-finite
 * numbers as `null` included; `route-json.test.ts` checks that on generated decisions.
 */

import type { MatchReport, OverlapSource, RouteDecision } from "../router.js";
import type { CandidateBreakdown } from "../scheduler/types.js";

/**
 * Worker keys whose event stream is catching up (a replay in flight or due): what the
 * index holds for them is an older prefix of their stream, so their overlap is reported
 * with `current: false`.
 */
export type NotCurrent = ReadonlySet<string>;
const NONE: NotCurrent = new Set();

/** Candidate i's reported and predicted GPU blocks (all reported when there is no prediction). */
function sourceOf(d: RouteDecision, c: CandidateBreakdown, i: number): OverlapSource {
  return d.overlapSources?.[i] ?? { reportedBlocks: c.overlap.gpu, predictedBlocks: 0 };
}

function candidateJson(c: CandidateBreakdown, notCurrent: NotCurrent, src: OverlapSource) {
  return {
    worker: c.worker,
    overlap_blocks: {
      gpu: c.overlap.gpu,
      host: c.overlap.host,
      disk: c.overlap.disk,
      store: c.overlap.store,
    },
    reported_blocks: src.reportedBlocks,
    predicted_blocks: src.predictedBlocks,
    current: !notCurrent.has(c.worker),
    new_prefill_blocks: c.newPrefillBlocks,
    cost: {
      prefill: c.prefillCost,
      decode: c.decodeCost,
      queue: c.queueCost,
      stale_penalty: c.stalePenalty,
      total: c.totalCost,
    },
    load: {
      pending_prefill_tokens: c.load.pendingPrefillTokens,
      active_blocks: c.load.activeBlocks,
      waiting: c.load.waiting,
      running: c.load.running,
      kv_load: c.load.kvLoad,
      capacity_blocks: c.load.capacityBlocks,
      basis: c.load.basis,
    },
    stale: c.stale,
    excluded: c.excluded,
    probability: c.probability,
  };
}

/** The body of a `/v1/route` answer as an object (the definition `writeDecision` follows). */
export function decisionJson(d: RouteDecision, notCurrent: NotCurrent = NONE) {
  return {
    request_id: d.requestId,
    worker: { id: d.workerId, rank: d.dpRank, key: d.worker, url: d.url, model: d.model },
    reason: d.reason,
    overlap_blocks: d.overlapBlocks,
    cached_tokens: d.cachedTokens,
    prompt_tokens: d.promptTokens,
    prompt_blocks: d.promptBlocks,
    block_size: d.blockSize,
    prefill_tokens: d.prefillTokens,
    temperature: d.temperature,
    fallbacks: {
      all_stale: d.fallbacks.allStale,
      kv_exclusion_skipped: d.fallbacks.kvExclusionSkipped,
    },
    kv_mean: d.kvMean,
    kv_std: d.kvStd,
    candidates: d.candidates.map((c, i) => candidateJson(c, notCurrent, sourceOf(d, c, i))),
    timings_ms: {
      hashing: d.timings.hashMs,
      matching: d.timings.matchMs,
      scoring: d.timings.scoreMs,
    },
  };
}

/** The body of a `/v1/match` answer as an object (the definition `writeMatch` follows). */
export function matchJson(m: MatchReport, notCurrent: NotCurrent = NONE) {
  return {
    prompt_tokens: m.promptTokens,
    prompt_blocks: m.promptBlocks,
    block_size: m.blockSize,
    store_blocks: m.store,
    workers: m.workers.map((w) => ({
      worker: w.worker,
      id: w.workerId,
      rank: w.dpRank,
      model: w.model,
      overlap_blocks: { gpu: w.gpu, host: w.host, disk: w.disk, store: w.store },
      cached_tokens: w.cachedTokens,
      current: !notCurrent.has(w.worker),
    })),
  };
}

// What JSON.stringify writes for each value type. `${x}` of a finite number is its JSON.
const num = (x: number): string => (Number.isFinite(x) ? `${x}` : "null");
const numOrNull = (x: number | null): string => (x === null ? "null" : num(x));
const str = (s: string): string => JSON.stringify(s);
const strOrNull = (s: string | null): string => (s === null ? "null" : JSON.stringify(s));

function writeCandidate(c: CandidateBreakdown, notCurrent: NotCurrent, src: OverlapSource): string {
  const o = c.overlap;
  const l = c.load;
  return (
    `{"worker":${str(c.worker)},` +
    `"overlap_blocks":{"gpu":${num(o.gpu)},"host":${num(o.host)},"disk":${num(o.disk)},"store":${num(o.store)}},` +
    `"reported_blocks":${num(src.reportedBlocks)},"predicted_blocks":${num(src.predictedBlocks)},` +
    `"current":${!notCurrent.has(c.worker)},"new_prefill_blocks":${num(c.newPrefillBlocks)},` +
    `"cost":{"prefill":${num(c.prefillCost)},"decode":${num(c.decodeCost)},"queue":${num(c.queueCost)},` +
    `"stale_penalty":${num(c.stalePenalty)},"total":${num(c.totalCost)}},` +
    `"load":{"pending_prefill_tokens":${num(l.pendingPrefillTokens)},"active_blocks":${num(l.activeBlocks)},` +
    `"waiting":${num(l.waiting)},"running":${num(l.running)},"kv_load":${numOrNull(l.kvLoad)},` +
    `"capacity_blocks":${numOrNull(l.capacityBlocks)},"basis":${str(l.basis)}},` +
    `"stale":${c.stale},"excluded":${strOrNull(c.excluded)},"probability":${num(c.probability)}}`
  );
}

/** `JSON.stringify(decisionJson(d))`, written directly. */
export function writeDecision(d: RouteDecision, notCurrent: NotCurrent = NONE): string {
  let out =
    `{"request_id":${str(d.requestId)},` +
    `"worker":{"id":${str(d.workerId)},"rank":${num(d.dpRank)},"key":${str(d.worker)},` +
    `"url":${str(d.url)},"model":${strOrNull(d.model)}},` +
    `"reason":${str(d.reason)},"overlap_blocks":${num(d.overlapBlocks)},` +
    `"cached_tokens":${num(d.cachedTokens)},"prompt_tokens":${num(d.promptTokens)},` +
    `"prompt_blocks":${num(d.promptBlocks)},"block_size":${num(d.blockSize)},` +
    `"prefill_tokens":${num(d.prefillTokens)},"temperature":${num(d.temperature)},` +
    `"fallbacks":{"all_stale":${d.fallbacks.allStale},"kv_exclusion_skipped":${d.fallbacks.kvExclusionSkipped}},` +
    `"kv_mean":${numOrNull(d.kvMean)},"kv_std":${numOrNull(d.kvStd)},"candidates":[`;
  const cs = d.candidates;
  for (let i = 0; i < cs.length; i++) {
    const c = writeCandidate(cs[i]!, notCurrent, sourceOf(d, cs[i]!, i));
    out += i === 0 ? c : `,${c}`;
  }
  const t = d.timings;
  return `${out}],"timings_ms":{"hashing":${num(t.hashMs)},"matching":${num(t.matchMs)},"scoring":${num(t.scoreMs)}}}`;
}

/** `JSON.stringify(matchJson(m))`, written directly. */
export function writeMatch(m: MatchReport, notCurrent: NotCurrent = NONE): string {
  let out =
    `{"prompt_tokens":${num(m.promptTokens)},"prompt_blocks":${num(m.promptBlocks)},` +
    `"block_size":${num(m.blockSize)},"store_blocks":${num(m.store)},"workers":[`;
  const ws = m.workers;
  for (let i = 0; i < ws.length; i++) {
    const w = ws[i]!;
    out +=
      `${i === 0 ? "" : ","}{"worker":${str(w.worker)},"id":${str(w.workerId)},"rank":${num(w.dpRank)},` +
      `"model":${strOrNull(w.model)},"overlap_blocks":{"gpu":${num(w.gpu)},"host":${num(w.host)},` +
      `"disk":${num(w.disk)},"store":${num(w.store)}},"cached_tokens":${num(w.cachedTokens)},` +
      `"current":${!notCurrent.has(w.worker)}}`;
  }
  return `${out}]}`;
}
