/**
 * A deterministic vLLM-like KV event stream for the ingest benchmark, generated the same
 * way in the publisher process and in the measuring process (same seed, same payloads).
 *
 * Shape: a GPU cache of `capacityBlocks` 16-token blocks. Each engine step stores 1–4
 * requests' new blocks (1–64 blocks each, extending an existing sequence or starting a
 * new one) and, once the cache is full, first evicts as many blocks as it needs, one
 * `BlockRemoved` per hash (as vLLM does), least recently extended sequence first, tail
 * first. Newest vLLM encoding: map envelope, map events, uint64 hashes.
 */

import { encodeEventBatch, type WireEvent } from "../src/protocol/event-encoder.js";
import { seededRng as rng } from "../src/util/rng.js";

export interface WorkloadOptions {
  /** Blocks to emit in total (stored + removed). */
  readonly blocks: number;
  readonly capacityBlocks: number;
  readonly seed: number;
}

export const DEFAULT_WORKLOAD: WorkloadOptions = {
  blocks: 1_000_000,
  capacityBlocks: 20_000,
  seed: 42,
};

export interface Workload {
  readonly payloads: Uint8Array[];
  /** Stored + removed blocks over all payloads. */
  readonly blocks: number;
  readonly storedBlocks: number;
  readonly removedBlocks: number;
  readonly events: number;
  readonly bytes: number;
}

export function generateWorkload(options: WorkloadOptions = DEFAULT_WORKLOAD): Workload {
  const rand = rng(options.seed);
  const int = (lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1));
  const hash = () => (BigInt(int(0, 0xffffffff)) << 32n) | BigInt(int(0, 0xffffffff));
  // Sequences in LRU order (front = least recently extended).
  let chains: bigint[][] = [];
  let held = 0;
  const payloads: Uint8Array[] = [];
  let storedBlocks = 0;
  let removedBlocks = 0;
  let events = 0;
  let bytes = 0;
  while (storedBlocks + removedBlocks < options.blocks) {
    const stores: { parent: bigint | null; hashes: bigint[]; chain: bigint[] }[] = [];
    let need = 0;
    for (let r = int(1, 4); r > 0; r--) {
      const n = int(1, 64);
      const extend = chains.length > 0 && rand() < 0.6;
      const chain = extend ? chains.splice(int(0, chains.length - 1), 1)[0]! : [];
      const hashes = Array.from({ length: n }, hash);
      stores.push({ parent: chain.length > 0 ? chain[chain.length - 1]! : null, hashes, chain });
      chain.push(...hashes);
      chains.push(chain);
      need += n;
    }
    const batch: WireEvent[] = [];
    // Evict before storing, as the block pool does when it allocates.
    let evict = held + need - options.capacityBlocks;
    let head = 0;
    while (evict > 0 && head < chains.length) {
      const victim = chains[head]!;
      const pending = stores.some((s) => s.chain === victim);
      if (pending || victim.length === 0) {
        head++;
        continue;
      }
      const h = victim.pop()!;
      batch.push({ type: "BlockRemoved", blockHashes: [h], medium: "GPU" });
      evict--;
      held--;
      removedBlocks++;
      if (victim.length === 0) chains.splice(head, 1);
    }
    chains = chains.filter((c) => c.length > 0);
    for (const s of stores) {
      const tokenIds = new Uint32Array(s.hashes.length * 16);
      for (let i = 0; i < tokenIds.length; i++) tokenIds[i] = int(0, 151_000);
      batch.push({
        type: "BlockStored",
        blockHashes: s.hashes,
        parentHash: s.parent,
        tokenIds,
        blockSize: 16,
        loraId: null,
        medium: "GPU",
        loraName: null,
      });
      held += s.hashes.length;
      storedBlocks += s.hashes.length;
    }
    events += batch.length;
    const payload = encodeEventBatch(
      { ts: 1_789_095_808 + payloads.length / 100, events: batch, dpRank: 0 },
      { eventForm: "map", envelopeForm: "map", hashForm: "uint64" },
    );
    bytes += payload.length;
    payloads.push(payload);
  }
  return {
    payloads,
    blocks: storedBlocks + removedBlocks,
    storedBlocks,
    removedBlocks,
    events,
    bytes,
  };
}
