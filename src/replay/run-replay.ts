/**
 * One replay run: a trace, a policy and a fleet, in virtual time. Arrivals are scheduled
 * one at a time (each arrival schedules the next), so KV events a request causes are
 * visible to the requests after it exactly when their propagation delay says so.
 */

import type { KvEvent } from "../protocol/events.js";
import type { CacheEvent } from "../sim/kv-cache.js";
import { deriveSeed } from "../util/rng.js";
import { EventQueue } from "./event-queue.js";
import { toKvEvent } from "./kv-event-convert.js";
import { type RunSummary, summariseRun, ttftSorted } from "./metrics.js";
import type { FleetView, RoutingPolicy } from "./policies.js";
import { type RequestOutcome, SimFleet } from "./sim-fleet.js";
import { collectTail, type TailData } from "./tail-data.js";
import type { TimingModel } from "./timing-model.js";
import { requestTokens } from "./tokens.js";
import type { TraceRequest } from "./trace.js";
import { SimWorkerCache } from "./worker-cache.js";

export interface FleetOptions {
  readonly workers: number;
  /** Usable KV blocks per worker; null = unlimited (enough for every prompt of the trace). */
  readonly capacityBlocks: number | null;
  /** Tokens per KV block (engine and router). */
  readonly blockSize: number;
  readonly timing: TimingModel;
  readonly seed: number;
  /** Engine → router KV event propagation delay, ms (0 = before the next arrival). */
  readonly eventDelayMs: number;
  /** Period of the simulated /metrics scrapes, ms (0 = none). */
  readonly scrapeIntervalMs: number;
}

export interface ReplayRun {
  readonly summary: RunSummary;
  /** TTFTs in ms, ascending (for the CDF plot). */
  readonly ttftSorted: Float64Array;
  /** Blocks evicted over all workers. */
  readonly evictions: number;
  /** KV events delivered to the policy. */
  readonly kvEvents: number;
  /** Wall-clock time of the run, ms. */
  readonly wallMs: number;
  /** Per-request tail figures, when asked for (`tail-data.ts`). */
  readonly tail?: TailData;
}

/** Blocks that hold every prompt of the trace at once: "unlimited" for one worker. */
export function unlimitedBlocks(requests: readonly TraceRequest[], blockSize: number): number {
  let n = 1;
  for (const r of requests) n += Math.ceil(r.inputLength / blockSize);
  return n;
}

/** Run `requests` through a fleet routed by the policy `makePolicy` builds. */
export function runReplay(
  requests: readonly TraceRequest[],
  makePolicy: (fleet: FleetView) => RoutingPolicy,
  opts: FleetOptions,
  collect: { readonly tail?: boolean } = {},
): ReplayRun {
  const started = performance.now();
  const q = new EventQueue();
  const capacity = opts.capacityBlocks ?? unlimitedBlocks(requests, opts.blockSize);
  let kvEvents = 0;
  let remaining = requests.length;
  // The policy sees the fleet through a view, so it can exist before the fleet does:
  // whether the caches need an event sink depends on the policy.
  let fleet: SimFleet | null = null;
  const view: FleetView = {
    get size() {
      return opts.workers;
    },
    outstanding: (w) => fleet!.outstanding(w),
  };
  const policy = makePolicy(view);
  const onKvEvent = policy.wantsKvEvents ? policy.onKvEvent?.bind(policy) : undefined;
  const caches = Array.from({ length: opts.workers }, (_, w) => {
    const seed = deriveSeed(opts.seed, `worker-cache-${w}`);
    const sink =
      onKvEvent === undefined
        ? undefined
        : (e: CacheEvent) => {
            const event: KvEvent = toKvEvent(e);
            kvEvents++;
            q.after(opts.eventDelayMs, () => onKvEvent(w, event, q.now));
          };
    return new SimWorkerCache(capacity, opts.blockSize, seed, sink);
  });
  fleet = new SimFleet(q, opts.timing, caches, {
    onFirstToken: (o) => policy.onFirstToken?.(o, q.now),
    onDone: (o) => {
      remaining--;
      policy.onDone?.(o, q.now);
    },
    onRejected: (o) => {
      remaining--;
      policy.onDone?.(o, q.now);
    },
  });
  const f = fleet;

  const outcomes: RequestOutcome[] = [];
  const arrive = (i: number): void => {
    const req = requests[i]!;
    const tokens = requestTokens(req);
    const worker = policy.choose(req, tokens, q.now);
    const o = f.submit(req, tokens, worker);
    outcomes.push(o);
    const next = requests[i + 1];
    if (next !== undefined) q.schedule(next.arrivalMs, () => arrive(i + 1));
  };
  if (requests.length > 0) q.schedule(requests[0]!.arrivalMs, () => arrive(0));

  const onScrape = policy.onScrape?.bind(policy);
  if (onScrape !== undefined && opts.scrapeIntervalMs > 0) {
    const scrape = (): void => {
      for (let w = 0; w < f.size; w++) {
        const l = f.load(w);
        onScrape(w, { ...l, numGpuBlocks: caches[w]!.capacityBlocks }, q.now);
      }
      if (remaining > 0) q.after(opts.scrapeIntervalMs, scrape);
    };
    q.schedule(requests[0]?.arrivalMs ?? 0, scrape);
  }

  q.run();
  const stats = Array.from({ length: f.size }, (_, w) => f.stats(w));
  return {
    summary: summariseRun(policy.name, outcomes, stats),
    ttftSorted: ttftSorted(outcomes),
    evictions: caches.reduce((s, c) => s + c.evictions, 0),
    kvEvents,
    wallMs: performance.now() - started,
    ...(collect.tail === true
      ? { tail: collectTail(requests, outcomes, f.size, opts.timing, opts.blockSize) }
      : {}),
  };
}
