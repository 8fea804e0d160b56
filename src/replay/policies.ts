/**
 * Routing policies compared by the replay. `kv` is the service's own Router (see
 * `kv-policy.ts`); the baselines here are plain selectors over the same fleet, so the
 * only difference between runs is the choice of worker.
 */

import type { KvEvent } from "../protocol/events.js";
import type { Rng } from "../util/rng.js";
import type { RequestOutcome } from "./sim-fleet.js";
import type { TraceRequest } from "./trace.js";

/** Our router and the plain baselines. */
export const BASELINE_POLICY_NAMES = ["kv", "round_robin", "random", "least_loaded"] as const;
/** The peers' own algorithms, re-implemented in `peers/` (docs/replay.md cites each source). */
export const PEER_POLICY_NAMES = [
  "sglang_cache_aware",
  "llmd_precise",
  "llmd_approx",
  "dynamo_kv",
  "aibrix_prefix_cache",
  "pstack_kvaware",
] as const;
/** What `--policy all` runs: our router, the baselines and the peers. */
export const POLICY_NAMES = [...BASELINE_POLICY_NAMES, ...PEER_POLICY_NAMES] as const;
/**
 * Policies asked for by name only (not in `all`): `kv_nopredict` is the router without
 * predict-on-route, as the replay ran `kv` before 2026-11-23 (its figures stay
 * reproducible); `kv` itself runs predict-on-route at the service default.
 * `earliest_first_token` is a yardstick that knows the present exactly
 * (`earliest-first-token.ts`). `kv_rate` is kv configured with the fleet's prefill rate
 * (`inFlight.prefillTokensPerSec`: a worker's prefill in progress counts by what is left
 * of it) and its per-request overhead as the queue weight (`compare.ts`).
 */
export const VARIANT_POLICY_NAMES = ["kv_nopredict", "kv_rate", "earliest_first_token"] as const;
export type PolicyName = (typeof POLICY_NAMES)[number] | (typeof VARIANT_POLICY_NAMES)[number];

export function isPolicyName(s: string): s is PolicyName {
  return (
    (POLICY_NAMES as readonly string[]).includes(s) ||
    (VARIANT_POLICY_NAMES as readonly string[]).includes(s)
  );
}

/** What a policy may observe of the fleet, as a router could. */
export interface FleetView {
  readonly size: number;
  /** Requests on the worker not yet done (queued + running). */
  outstanding(worker: number): number;
}

/** A worker's state as its /metrics endpoint shows it. */
export interface ScrapedLoad {
  readonly running: number;
  readonly waiting: number;
  readonly kvUsage: number;
  readonly numGpuBlocks: number;
}

export interface RoutingPolicy {
  readonly name: string;
  /** Whether the policy wants the workers' KV events (event-fed routers). */
  readonly wantsKvEvents: boolean;
  /** Pick a worker index for a request arriving now. */
  choose(req: TraceRequest, tokens: readonly number[], nowMs: number): number;
  /** A worker's KV event reached the router. */
  onKvEvent?(worker: number, event: KvEvent, nowMs: number): void;
  /** A scrape of a worker's metrics completed. */
  onScrape?(worker: number, load: ScrapedLoad, nowMs: number): void;
  onFirstToken?(outcome: RequestOutcome, nowMs: number): void;
  onDone?(outcome: RequestOutcome, nowMs: number): void;
}

/** Worker i, i+1, … in turn. */
export class RoundRobinPolicy implements RoutingPolicy {
  readonly name = "round_robin";
  readonly wantsKvEvents = false;
  #next = 0;
  constructor(readonly fleet: FleetView) {}
  choose(): number {
    const w = this.#next;
    this.#next = (w + 1) % this.fleet.size;
    return w;
  }
}

/** A uniformly random worker (seeded). */
export class RandomPolicy implements RoutingPolicy {
  readonly name = "random";
  readonly wantsKvEvents = false;
  constructor(
    readonly fleet: FleetView,
    readonly rng: Rng,
  ) {}
  choose(): number {
    return Math.min(this.fleet.size - 1, Math.floor(this.rng() * this.fleet.size));
  }
}

/**
 * The worker with the fewest requests queued or running, read exactly from the fleet
 * (more than a real router would know: a generous baseline). Ties go round-robin.
 */
export class LeastLoadedPolicy implements RoutingPolicy {
  readonly name = "least_loaded";
  readonly wantsKvEvents = false;
  #start = 0;
  constructor(readonly fleet: FleetView) {}
  choose(): number {
    const n = this.fleet.size;
    let best = this.#start;
    let bestLoad = this.fleet.outstanding(best);
    for (let k = 1; k < n; k++) {
      const w = (this.#start + k) % n;
      const load = this.fleet.outstanding(w);
      if (load < bestLoad) {
        best = w;
        bestLoad = load;
      }
    }
    this.#start = (this.#start + 1) % n;
    return best;
  }
}
