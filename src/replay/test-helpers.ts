/** Builders shared by the replay's unit tests (not part of the public API). */

import { DEFAULT_SCHEDULER_CONFIG } from "../scheduler/defaults.js";
import type { CompareOptions } from "./compare.js";
import type { PolicyName } from "./policies.js";
import type { TimingModel } from "./timing-model.js";
import type { TraceRequest } from "./trace.js";

/** A request of the trace arriving at `s` seconds, with one output token. */
export const traceAt = (
  index: number,
  s: number,
  inputLength: number,
  hashIds: number[],
): TraceRequest => ({
  index,
  arrivalMs: s * 1000,
  inputLength,
  outputLength: 1,
  hashIds,
});

/**
 * A run of one policy on a small fleet with 16-token blocks and the tail report at factor 2
 * (the tail tests' set-up): `capacityBlocks` null is unlimited caches.
 */
export function tailRunOptions(o: {
  workers: number;
  policy: PolicyName;
  timing: TimingModel;
  capacityBlocks: number | null;
  reference: boolean;
}): CompareOptions {
  return {
    workers: o.workers,
    capacityBlocks: o.capacityBlocks,
    blockSize: 16,
    timing: o.timing,
    seed: 1,
    eventDelayMs: 5,
    scrapeIntervalMs: 1000,
    policies: [o.policy],
    scheduler: DEFAULT_SCHEDULER_CONFIG,
    reference: o.reference,
    tail: { factor: 2, policies: [o.policy] },
  };
}

/** A seeded xorshift in [0, 1). */
export function xorshift(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x / 2 ** 32;
  };
}

/**
 * Request `index` at `arrivalMs` on the 512-token blocks `ids`: 1–511 tokens past the
 * history's full blocks, 1–`maxOutput` output tokens (two draws of `r`, in that order).
 */
function randomRequest(
  r: () => number,
  index: number,
  arrivalMs: number,
  ids: number[],
  maxOutput: number,
): TraceRequest {
  return {
    index,
    arrivalMs,
    inputLength: (ids.length - 1) * 512 + 1 + Math.floor(r() * 511),
    outputLength: 1 + Math.floor(r() * maxOutput),
    hashIds: ids,
  };
}

/**
 * A random trace of `n` requests: conversations that grow (each turn extends its history
 * by 1–4 blocks) and new prompts of 1–6 blocks, in bursts (30 % arrive with the request
 * before) and lulls (gaps up to 0.6 s, a fifth of them up to 4 s), so that prefixes are
 * shared by requests arriving close together.
 */
export function randomTrace(seed: number, n: number): TraceRequest[] {
  const r = xorshift(seed);
  const histories: number[][] = [];
  let nextId = 1;
  let t = 0;
  const out: TraceRequest[] = [];
  for (let i = 0; i < n; i++) {
    t += r() < 0.3 ? 0 : Math.floor(r() * (r() < 0.2 ? 4000 : 600));
    let ids: number[];
    if (histories.length > 0 && r() < 0.6) {
      const k = Math.floor(r() * histories.length);
      const add = 1 + Math.floor(r() * 4);
      ids = [...histories[k]!];
      for (let j = 0; j < add; j++) ids.push(nextId++);
      histories[k] = ids;
    } else {
      const len = 1 + Math.floor(r() * 6);
      ids = [];
      for (let j = 0; j < len; j++) ids.push(nextId++);
      histories.push(ids);
    }
    out.push(randomRequest(r, i, t, ids, 40));
  }
  return out;
}

/**
 * A tiny random trace for exhaustive checks: new prompts of 1–4 blocks, and turns that
 * extend an earlier history by 0–2 blocks, sometimes after cutting it short (a branch:
 * two prompts sharing only part of a history). Arrivals in bursts (40 % with the request
 * before) or up to 2.5 s apart; prompts of 1–511 tokens past their history's full blocks.
 */
export function branchingTrace(seed: number, n: number): TraceRequest[] {
  const r = xorshift(seed);
  const histories: number[][] = [];
  let nextId = 1;
  let t = 0;
  const out: TraceRequest[] = [];
  for (let i = 0; i < n; i++) {
    t += r() < 0.4 ? 0 : Math.floor(r() * 2500);
    let ids: number[];
    if (histories.length > 0 && r() < 0.65) {
      const h = histories[Math.floor(r() * histories.length)]!;
      ids = r() < 0.3 ? h.slice(0, 1 + Math.floor(r() * h.length)) : [...h];
      const add = Math.floor(r() * 3);
      for (let j = 0; j < add; j++) ids.push(nextId++);
    } else {
      ids = [];
      const len = 1 + Math.floor(r() * 4);
      for (let j = 0; j < len; j++) ids.push(nextId++);
    }
    histories.push(ids);
    out.push(randomRequest(r, i, t, ids, 200));
  }
  return out;
}
