/**
 * Dynamo's KV router cost, re-implemented from its source (ai-dynamo/dynamo
 * `lib/llm/src/kv_router/scheduler.rs` and `sequence.rs`, read 2026-11-23; docs/replay.md).
 * For each worker:
 *
 *   logit = overlap_score_weight · prefill_blocks + decode_blocks
 *   prefill_blocks = (prefill tokens of its active requests still in prefill
 *                     + this prompt's tokens not covered by its cached prefix) / block size
 *   decode_blocks  = blocks of its active requests (each shared block once)
 *                     + this prompt's blocks not already among them
 *
 * The cached prefix comes from the KV-event-fed indexer; the active requests from the
 * router's own bookkeeping (a request stops counting as prefill at its first token and
 * leaves at completion). Temperature 0: the lowest logit wins; ties go to the worker
 * with the smaller cached tree, then at random. Default `overlap_score_weight` 1.
 */

import { computeBlockKeys } from "../../index/block-key.js";
import type { BlockKeySeq } from "../../index/types.js";
import type { KvEvent } from "../../protocol/events.js";
import type { Rng } from "../../util/rng.js";
import type { FleetView, RoutingPolicy } from "../policies.js";
import type { RequestOutcome } from "../sim-fleet.js";
import type { TraceRequest } from "../trace.js";
import { EventPrefixView } from "./event-prefix-view.js";
import { blockKeyNumber } from "./routed-prefix-index.js";

export interface DynamoConfig {
  readonly overlapScoreWeight: number;
}

export const DYNAMO_DEFAULTS: DynamoConfig = Object.freeze({ overlapScoreWeight: 1 });

interface ActiveRequest {
  readonly worker: number;
  readonly blocks: readonly number[];
  /** Blocks beyond the full ones (a partial last block), never shared. */
  readonly partial: number;
  prefillTokens: number;
}

/** One worker's active sequences: shared blocks counted once. */
class ActiveSequences {
  readonly refs = new Map<number, number>();
  partial = 0;
  prefillTokens = 0;

  get blocks(): number {
    return this.refs.size + this.partial;
  }

  add(r: ActiveRequest): void {
    for (const b of r.blocks) this.refs.set(b, (this.refs.get(b) ?? 0) + 1);
    this.partial += r.partial;
    this.prefillTokens += r.prefillTokens;
  }

  remove(r: ActiveRequest): void {
    for (const b of r.blocks) {
      const n = this.refs.get(b)! - 1;
      if (n === 0) this.refs.delete(b);
      else this.refs.set(b, n);
    }
    this.partial -= r.partial;
    this.prefillTokens -= r.prefillTokens;
  }
}

/**
 * How many of the prompt's blocks the active sequences hold. Block keys are chained (key
 * i names the whole prefix 0..i), so an active request holding block i holds every block
 * before it: the held blocks are a leading run, found by binary search instead of a
 * lookup per block (the same count as testing each block, in O(log n) lookups).
 */
function sharedPrefix(refs: ReadonlyMap<number, number>, blocks: readonly number[]): number {
  if (refs.size === 0) return 0;
  let lo = 0;
  let hi = blocks.length;
  while (lo < hi) {
    const mid = (lo + hi + 1) >>> 1;
    if (refs.has(blocks[mid - 1]!)) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/** The prompt's full blocks as numbers (computed once per request, read per worker). */
function blockNumbers(keys: BlockKeySeq): number[] {
  const n = keys.length / 2;
  const out = new Array<number>(n);
  for (let i = 0; i < n; i++) out[i] = blockKeyNumber(keys, i);
  return out;
}

export class DynamoKvPolicy implements RoutingPolicy {
  readonly name = "dynamo_kv";
  readonly wantsKvEvents = true;
  readonly view: EventPrefixView;
  readonly active: ActiveSequences[];
  readonly #requests = new Map<number, ActiveRequest>();
  readonly #overlap: Int32Array;
  readonly #tree: Int32Array;

  constructor(
    readonly fleet: FleetView,
    blockSize: number,
    readonly rng: Rng,
    readonly config: DynamoConfig = DYNAMO_DEFAULTS,
  ) {
    this.view = new EventPrefixView(fleet.size, blockSize);
    this.active = Array.from({ length: fleet.size }, () => new ActiveSequences());
    this.#overlap = new Int32Array(fleet.size);
    this.#tree = new Int32Array(fleet.size);
  }

  choose(req: TraceRequest, tokens: readonly number[]): number {
    const keys = computeBlockKeys(tokens, this.view.blockSize, null);
    const blocks = blockNumbers(keys);
    const { worker, newTokens } = this.pick(keys, tokens.length, blocks);
    const r: ActiveRequest = {
      worker,
      blocks,
      partial: tokens.length % this.view.blockSize === 0 ? 0 : 1,
      prefillTokens: newTokens,
    };
    this.#requests.set(req.index, r);
    this.active[worker]!.add(r);
    return worker;
  }

  /** The logits and the choice, on the current view and active sequences. */
  pick(
    keys: BlockKeySeq,
    promptTokens: number,
    blocks: readonly number[] = blockNumbers(keys),
  ): { worker: number; newTokens: number } {
    const bs = this.view.blockSize;
    this.view.longestPrefix(keys, this.#overlap, this.#tree);
    const fullBlocks = blocks.length;
    const partial = promptTokens % bs === 0 ? 0 : 1;
    let best = Number.POSITIVE_INFINITY;
    let chosen = 0;
    let chosenNew = promptTokens;
    let ties = 0;
    for (let w = 0; w < this.fleet.size; w++) {
      const a = this.active[w]!;
      const newTokens = Math.max(0, promptTokens - this.#overlap[w]! * bs);
      const prefillBlocks = (a.prefillTokens + newTokens) / bs;
      const newBlocks = partial + fullBlocks - sharedPrefix(a.refs, blocks);
      const logit = this.config.overlapScoreWeight * prefillBlocks + a.blocks + newBlocks;
      const better =
        logit < best - 1e-9 ||
        (Math.abs(logit - best) <= 1e-9 && this.#tree[w]! < this.#tree[chosen]!);
      if (better) {
        best = logit;
        chosen = w;
        chosenNew = newTokens;
        ties = 1;
      } else if (Math.abs(logit - best) <= 1e-9 && this.#tree[w]! === this.#tree[chosen]!) {
        ties++;
        if (this.rng() * ties < 1) {
          chosen = w;
          chosenNew = newTokens;
        }
      }
    }
    return { worker: chosen, newTokens: chosenNew };
  }

  onKvEvent(w: number, event: KvEvent): void {
    this.view.apply(w, event);
  }

  onFirstToken(o: RequestOutcome): void {
    const r = this.#requests.get(o.index);
    if (r === undefined || r.prefillTokens === 0) return;
    this.active[r.worker]!.prefillTokens -= r.prefillTokens;
    r.prefillTokens = 0;
  }

  onDone(o: RequestOutcome): void {
    const r = this.#requests.get(o.index);
    if (r === undefined) return;
    this.#requests.delete(o.index);
    this.active[r.worker]!.remove(r);
  }
}
