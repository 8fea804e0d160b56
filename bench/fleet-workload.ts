/**
 * The fleet benchmark's workload, in the shape of Dynamo's indexer benchmark
 * (ai-dynamo/dynamo `lib/kv-router/benches/mooncake_bench.rs` and `common/mod.rs`, read
 * 2026-11-23): the Mooncake trace's requests, duplicated into hash-disjoint copies until
 * there are enough for the fleet, partitioned at random over the workers; each worker
 * runs a prefix cache of `gpuBlocks` blocks (LRU), so each request becomes one lookup on
 * the router side, then a `stored` event for the blocks its worker did not hold and a
 * `removed` event for what that evicted. One trace `hash_id` = one block; its tokens are
 * derived from the id (same id → same tokens), as Dynamo does.
 */

import { readFileSync } from "node:fs";
import { computeBlockKeys } from "../src/index/block-key.js";
import type { BlockKeySeq } from "../src/index/types.js";
import { type EngineBlockHash, engineHashFromSafeInt } from "../src/protocol/engine-hash.js";
import type { KvEvent } from "../src/protocol/events.js";
import { type WorkerKey, workerKey } from "../src/protocol/worker.js";
import { seededRng } from "../src/util/rng.js";

export interface TraceRequest {
  readonly timestamp: number;
  readonly hashIds: readonly number[];
}

export function loadTrace(path: string): TraceRequest[] {
  return readFileSync(path, "utf8")
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => {
      const r = JSON.parse(l) as { timestamp: number; hash_ids: number[] };
      return { timestamp: r.timestamp, hashIds: r.hash_ids };
    });
}

export type FleetOp =
  | { readonly kind: "lookup"; readonly keys: BlockKeySeq; readonly worker: number }
  | { readonly kind: "event"; readonly worker: WorkerKey; readonly event: KvEvent };

export interface FleetWorkloadOptions {
  readonly workers: number;
  readonly requests: number;
  readonly gpuBlocks: number;
  readonly blockSize: number;
  readonly seed: number;
}

/** Tokens of one trace block: deterministic in the (copy-offset) hash id. */
export function blockTokens(hashId: number, blockSize: number, out: number[]): void {
  for (let j = 0; j < blockSize; j++) out.push((Math.imul(hashId + 1, 2654435761) + j) >>> 8);
}

export function workerKeyOf(i: number): WorkerKey {
  return workerKey(`w${i}`);
}

/**
 * The ops in trace order (copies interleaved), generated lazily so only the index, not
 * the workload, fills the heap.
 */
export function* fleetOps(
  trace: readonly TraceRequest[],
  o: FleetWorkloadOptions,
): Generator<FleetOp> {
  const rand = seededRng(o.seed);
  let maxId = 0;
  for (const r of trace) for (const h of r.hashIds) if (h > maxId) maxId = h;
  const copies = Math.ceil(o.requests / trace.length);
  const caches = Array.from({ length: o.workers }, () => new Map<number, true>());
  let emitted = 0;
  for (const r of trace) {
    for (let d = 0; d < copies && emitted < o.requests; d++, emitted++) {
      const ids = r.hashIds.map((h) => h + d * (maxId + 1));
      const w = Math.floor(rand() * o.workers);
      const tokens: number[] = [];
      for (const id of ids) blockTokens(id, o.blockSize, tokens);
      yield { kind: "lookup", keys: computeBlockKeys(tokens, o.blockSize, null), worker: w };
      // The worker serves it: leading blocks it holds are hits, the rest are stored.
      const cache = caches[w]!;
      let held = 0;
      while (held < ids.length && cache.has(ids[held]!)) held++;
      for (let i = 0; i < held; i++) {
        cache.delete(ids[i]!);
        cache.set(ids[i]!, true);
      }
      if (held === ids.length) continue;
      // Runs of blocks the worker lacks, each stored under the block before it (a block
      // still cached past a gap is not announced twice, as vLLM does not).
      const runs: [number, number][] = [];
      for (let i = held; i < ids.length; i++) {
        if (cache.has(ids[i]!)) continue;
        const last = runs[runs.length - 1];
        if (last !== undefined && last[1] === i) last[1] = i + 1;
        else runs.push([i, i + 1]);
      }
      for (let i = held; i < ids.length; i++) {
        cache.delete(ids[i]!);
        cache.set(ids[i]!, true);
      }
      const evicted: EngineBlockHash[] = [];
      for (const id of cache.keys()) {
        if (cache.size <= o.gpuBlocks) break;
        cache.delete(id);
        evicted.push(engineHashFromSafeInt(id + 1));
      }
      const key = workerKeyOf(w);
      for (const [a, b] of runs) {
        yield {
          kind: "event",
          worker: key,
          event: {
            type: "stored",
            blockHashes: ids.slice(a, b).map((id) => engineHashFromSafeInt(id + 1)),
            parentHash: a === 0 ? null : engineHashFromSafeInt(ids[a - 1]! + 1),
            tokenIds: tokens.slice(a * o.blockSize, b * o.blockSize),
            blockSize: o.blockSize,
            loraId: null,
            loraName: null,
            medium: "GPU",
            tier: "gpu",
          },
        };
      }
      if (evicted.length > 0) {
        yield {
          kind: "event",
          worker: key,
          event: { type: "removed", blockHashes: evicted, medium: "GPU", tier: "gpu" },
        };
      }
    }
  }
}
