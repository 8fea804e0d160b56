/**
 * vLLM production-stack's `kvaware` routing logic, re-implemented from its source
 * (vllm-project/production-stack `src/vllm_router/routers/routing_logic.py`, class
 * `KvawareRouter`, read 2026-11-23; docs/replay.md). Per request the router asks the
 * LMCache controller which instance holds the longest prefix of the prompt:
 *
 * - if an instance holds it and the match reaches `prompt length − kv_aware_threshold`
 *   tokens (default threshold 2,000), the request goes there — however busy it is;
 * - otherwise it falls back: a request with a session id goes to the session's node on a
 *   consistent-hash ring, one without goes to the engine with the lowest QPS (an engine
 *   with no traffic yet first).
 *
 * The controller's answer is modelled by the workers' own KV events (the replay has no
 * LMCache tier); Mooncake traces carry no session id, so the fallback is the QPS one.
 */

import { computeBlockKeys } from "../../index/block-key.js";
import type { BlockKeySeq } from "../../index/types.js";
import type { KvEvent } from "../../protocol/events.js";
import type { FleetView, RoutingPolicy } from "../policies.js";
import type { RequestOutcome } from "../sim-fleet.js";
import type { TraceRequest } from "../trace.js";
import { EventPrefixView } from "./event-prefix-view.js";
import { FleetTracker } from "./fleet-tracker.js";

export interface ProductionStackKvawareConfig {
  /** Tokens the holder's match may fall short of the prompt length. */
  readonly kvAwareThreshold: number;
  /** Sliding window of the request-rate statistics, ms. */
  readonly qpsWindowMs: number;
}

export const PRODUCTION_STACK_DEFAULTS: ProductionStackKvawareConfig = Object.freeze({
  kvAwareThreshold: 2_000,
  qpsWindowMs: 60_000,
});

export class ProductionStackKvawarePolicy implements RoutingPolicy {
  readonly name = "pstack_kvaware";
  readonly wantsKvEvents = true;
  readonly view: EventPrefixView;
  readonly tracker: FleetTracker;
  readonly #match: Int32Array;
  readonly decisions = { holder: 0, qpsFallback: 0 };

  constructor(
    readonly fleet: FleetView,
    blockSize: number,
    readonly config: ProductionStackKvawareConfig = PRODUCTION_STACK_DEFAULTS,
  ) {
    this.view = new EventPrefixView(fleet.size, blockSize);
    this.tracker = new FleetTracker(fleet.size, config.qpsWindowMs);
    this.#match = new Int32Array(fleet.size);
  }

  choose(req: TraceRequest, tokens: readonly number[], nowMs: number): number {
    const keys = computeBlockKeys(tokens, this.view.blockSize, null);
    const w = this.pick(keys, tokens.length, nowMs);
    this.tracker.routed(req.index, w, nowMs);
    return w;
  }

  /** The decision rule alone, on the current view and rates. */
  pick(keys: BlockKeySeq, promptTokens: number, nowMs: number): number {
    this.view.longestPrefix(keys, this.#match);
    let holder = -1;
    let best = 0;
    for (let w = 0; w < this.fleet.size; w++) {
      if (this.#match[w]! > best) {
        best = this.#match[w]!;
        holder = w;
      }
    }
    const matchedTokens = best * this.view.blockSize;
    if (holder >= 0 && matchedTokens >= Math.max(promptTokens - this.config.kvAwareThreshold, 0)) {
      this.decisions.holder++;
      return holder;
    }
    this.decisions.qpsFallback++;
    return this.#lowestQps(nowMs);
  }

  #lowestQps(nowMs: number): number {
    let best = 0;
    let bestQps = Number.POSITIVE_INFINITY;
    for (let w = 0; w < this.fleet.size; w++) {
      if (!this.tracker.seen(w)) return w;
      const q = this.tracker.qps(w, nowMs);
      if (q < bestQps) {
        bestQps = q;
        best = w;
      }
    }
    return best;
  }

  onKvEvent(w: number, event: KvEvent): void {
    this.view.apply(w, event);
  }

  onDone(o: RequestOutcome): void {
    this.tracker.done(o.index);
  }
}
