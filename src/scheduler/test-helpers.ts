/** Builders shared by the scheduler's unit tests (not part of the public API). */

import type { EffectiveLoad } from "../load/types.js";
import { workerKey } from "../protocol/worker.js";
import type { CandidateInput, TierOverlap } from "./types.js";

export { seededRng } from "../util/rng.js";

export function load(over: Partial<EffectiveLoad> = {}): EffectiveLoad {
  return {
    pendingPrefillTokens: 0,
    activeBlocks: 0,
    waiting: 0,
    running: 0,
    kvLoad: null,
    capacityBlocks: null,
    basis: "predicted",
    ...over,
  };
}

export function cand(
  id: string,
  over: { overlap?: Partial<TierOverlap>; load?: Partial<EffectiveLoad>; stale?: boolean } = {},
): CandidateInput {
  return {
    worker: workerKey(id),
    overlap: { gpu: 0, host: 0, disk: 0, store: 0, ...over.overlap },
    load: load(over.load),
    stale: over.stale ?? false,
  };
}
