/**
 * The fleet benchmark's workload, in the shape of Dynamo's indexer benchmark
 * (ai-dynamo/dynamo `lib/bench/kv_router/mooncake_bench.rs`, `common/mod.rs`,
 * `common/args.rs`, formerly `lib/kv-router/benches/`; read 2026-11-23). Dynamo:
 * 1. `trace_duplication_factor` hash-disjoint copies of the trace (copy d adds
 *    d × (max hash_id + 1) to every id; default 1 = the trace as is);
 * 2. the requests partitioned at random over `num_unique_inference_workers` (default
 *    1,000), each unique worker's mock engine producing its KV events;
 * 3. `-d` (`inference_worker_duplication_factor`) replicas of every unique worker replay
 *    the *same* requests and the *same* events (same hashes) under distinct worker ids:
 *    its 7,000-worker figures are 1,000 unique workers × `-d 7`, so every replica of a
 *    worker holds what the worker holds, and the conversation trace's first block (in
 *    every request) ends up held by nearly the whole fleet.
 * Here: `copies`, `uniqueWorkers` and `replicas` mean the same; each unique worker is a
 * prefix cache of `gpuBlocks` blocks (LRU), so each request becomes, for each replica,
 * one lookup, then a `stored` event per run of blocks the worker did not hold and a
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
  readonly outputLength: number;
}

export function loadTrace(path: string): TraceRequest[] {
  return readFileSync(path, "utf8")
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => {
      const r = JSON.parse(l) as { timestamp: number; hash_ids: number[]; output_length?: number };
      return { timestamp: r.timestamp, hashIds: r.hash_ids, outputLength: r.output_length ?? 0 };
    });
}

export type FleetOp =
  | { readonly kind: "lookup"; readonly keys: BlockKeySeq; readonly worker: number }
  | { readonly kind: "event"; readonly worker: WorkerKey; readonly event: KvEvent };

export interface FleetWorkloadOptions {
  /** Workers simulated (each its own cache and events): Dynamo's unique workers. */
  readonly uniqueWorkers: number;
  /** Worker ids per unique worker, replaying its requests and events (Dynamo's `-d`). */
  readonly replicas: number;
  /** Hash-disjoint copies of the trace (Dynamo's `--trace-duplication-factor`). */
  readonly copies: number;
  /**
   * Output tokens per decode block (0 = no decode blocks). Dynamo's mock engine stores
   * the blocks a request's output fills, one `stored` event per block as it completes,
   * at its block size (default 128 tokens); with the prompt's event that is ~3.2 events
   * per request on the conversation trace, as in its published op counts.
   */
  readonly decodeTokensPerBlock: number;
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
  const caches = Array.from({ length: o.uniqueWorkers }, () => new Map<number, true>());
  const keysOf = Array.from({ length: o.replicas }, (_, r) =>
    Array.from({ length: o.uniqueWorkers }, (_, u) => workerKeyOf(u + r * o.uniqueWorkers)),
  );
  // Decode blocks get ids past every copy's: unique per request, held by nobody else.
  let nextDecodeId = o.copies * (maxId + 1);
  for (const r of trace) {
    for (let d = 0; d < o.copies; d++) {
      const prompt = r.hashIds.length;
      const decode =
        o.decodeTokensPerBlock > 0 ? Math.floor(r.outputLength / o.decodeTokensPerBlock) : 0;
      const ids = r.hashIds.map((h) => h + d * (maxId + 1));
      for (let j = 0; j < decode; j++) ids.push(nextDecodeId++);
      const w = Math.floor(rand() * o.uniqueWorkers);
      const tokens: number[] = [];
      for (const id of ids) blockTokens(id, o.blockSize, tokens);
      const keys = computeBlockKeys(tokens.slice(0, prompt * o.blockSize), o.blockSize, null);
      // The worker serves it: leading blocks it holds are hits, the rest are stored.
      const cache = caches[w]!;
      let held = 0;
      while (held < prompt && cache.has(ids[held]!)) held++;
      for (let i = 0; i < held; i++) {
        cache.delete(ids[i]!);
        cache.set(ids[i]!, true);
      }
      const events: KvEvent[] = [];
      // Runs of prompt blocks the worker lacks, each stored under the block before it (a
      // block still cached past a gap is not announced twice, as vLLM does not); then
      // each decode block alone, as the output fills it.
      const runs: [number, number][] = [];
      for (let i = held; i < prompt; i++) {
        if (cache.has(ids[i]!)) continue;
        const last = runs[runs.length - 1];
        if (last !== undefined && last[1] === i) last[1] = i + 1;
        else runs.push([i, i + 1]);
      }
      for (let i = prompt; i < ids.length; i++) runs.push([i, i + 1]);
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
      for (const [a, b] of runs) {
        events.push({
          type: "stored",
          blockHashes: ids.slice(a, b).map((id) => engineHashFromSafeInt(id + 1)),
          parentHash: a === 0 ? null : engineHashFromSafeInt(ids[a - 1]! + 1),
          tokenIds: tokens.slice(a * o.blockSize, b * o.blockSize),
          blockSize: o.blockSize,
          loraId: null,
          loraName: null,
          medium: "GPU",
          tier: "gpu",
        });
      }
      if (evicted.length > 0) {
        events.push({ type: "removed", blockHashes: evicted, medium: "GPU", tier: "gpu" });
      }
      // Every replica asks for the prompt, then announces what its (identical) cache did.
      for (let rep = 0; rep < o.replicas; rep++) {
        yield { kind: "lookup", keys, worker: w + rep * o.uniqueWorkers };
        const key = keysOf[rep]![w]!;
        for (const event of events) yield { kind: "event", worker: key, event };
      }
    }
  }
}
