/**
 * Test-only builders for the peer policies' tests: prompts made of named 16-token blocks,
 * a fleet view, trace requests, and a per-worker simulated cache whose engine events are
 * handed to a policy (so event-fed peers see what a real engine would announce).
 */

import type { CacheEvent } from "../../sim/kv-cache.js";
import { toKvEvent } from "../kv-event-convert.js";
import type { FleetView, RoutingPolicy } from "../policies.js";
import type { RequestOutcome } from "../sim-fleet.js";
import type { TraceRequest } from "../trace.js";
import { SimWorkerCache } from "../worker-cache.js";

export const BS = 16;

/** A prompt of whole 16-token blocks; block named `n` is tokens n*1000 + 0..15. */
export function prompt(...blocks: number[]): number[] {
  const out: number[] = [];
  for (const b of blocks) for (let i = 0; i < BS; i++) out.push(b * 1000 + i);
  return out;
}

export function fleetView(size: number): FleetView {
  return { size, outstanding: () => 0 };
}

let nextIndex = 0;
export function traceRequest(tokens: readonly number[]): TraceRequest {
  return {
    index: nextIndex++,
    arrivalMs: 0,
    inputLength: tokens.length,
    outputLength: 1,
    hashIds: [],
  };
}

/** The outcome record the fleet would report for request `index` on `worker`. */
export function outcome(index: number, worker: number): RequestOutcome {
  return {
    index,
    worker,
    arrivalMs: 0,
    inputTokens: 0,
    outputTokens: 1,
    hitTokens: 0,
    startMs: 0,
    firstTokenMs: 0,
    doneMs: 0,
    rejected: false,
  };
}

/** Simulated worker caches whose events go straight to `policy.onKvEvent`. */
export class EventFleet {
  readonly caches: SimWorkerCache[];
  #id = 1_000_000;

  constructor(size: number, policy: RoutingPolicy, capacityBlocks = 10_000) {
    this.caches = Array.from(
      { length: size },
      (_, w) =>
        new SimWorkerCache(capacityBlocks, BS, 7, (e: CacheEvent) =>
          policy.onKvEvent?.(w, toKvEvent(e), 0),
        ),
    );
  }

  /** Worker `w` computes `tokens` (and keeps them cached after). */
  cache(w: number, tokens: readonly number[]): void {
    const id = this.#id++;
    this.caches[w]!.admit(id, tokens);
    this.caches[w]!.release(id);
  }
}
