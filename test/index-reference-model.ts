/**
 * A brute-force model of the prefix index for property tests: nodes are identified by
 * their whole token prefix (no hashing at all), holdings are plain Maps and Sets, pruning
 * is a global fixpoint and matching walks prefixes one by one. Slow and obviously right,
 * which is the point: `RadixTreeIndex` must agree with it on every observable.
 */

import type { ApplyResult, ApplyStatus, IndexStats, WorkerMatch } from "../src/index/types.js";
import type { EngineBlockHash } from "../src/protocol/engine-hash.js";
import type { KvEvent, Tier } from "../src/protocol/events.js";
import type { WorkerKey } from "../src/protocol/worker.js";

interface Holding {
  node: string;
  tiers: Set<Tier>;
  /** Extra physical copies per tier (the same block stored again under the same hash). */
  copies: Map<Tier, number>;
}
interface ModelNode {
  lora: string;
  tokens: number[];
  parent: string | null;
}

const nodeId = (lora: string, tokens: readonly number[]): string => `${lora}|${tokens.join(",")}`;

export class ReferenceIndex {
  readonly workers = new Map<WorkerKey, Map<EngineBlockHash, Holding>>();
  readonly nodes = new Map<string, ModelNode>();
  readonly outcomes: Record<string, number> = {};
  /** Per worker, engine hashes stored for two different blocks (until a clear). */
  readonly #reused = new Map<WorkerKey, Set<EngineBlockHash>>();

  /**
   * `ambiguousParents` (the index's rule): a stored event whose parent is a hash its
   * worker used for two blocks is refused as `parent_ambiguous`. Off: chained from the
   * block the hash last named (the index before that rule; knows at least as much).
   */
  constructor(
    readonly blockSize: number,
    readonly ambiguousParents = true,
  ) {}

  apply(worker: WorkerKey, event: KvEvent): ApplyResult {
    let held = this.workers.get(worker);
    if (held === undefined) {
      held = new Map();
      this.workers.set(worker, held);
    }
    let reused = this.#reused.get(worker);
    if (reused === undefined) {
      reused = new Set();
      this.#reused.set(worker, reused);
    }
    const r = this.#apply(held, reused, event);
    const k = `${event.type}/${r.status}`;
    this.outcomes[k] = (this.outcomes[k] ?? 0) + 1;
    this.#prune();
    return r;
  }

  removeWorker(worker: WorkerKey): void {
    this.workers.delete(worker);
    this.#reused.delete(worker);
    this.#prune();
  }

  /** Every node's full prompt, to query the index with. */
  prompts(): { tokens: number[]; lora: string }[] {
    return [...this.nodes.values()].map((n) => ({ tokens: n.tokens, lora: n.lora }));
  }

  match(tokens: readonly number[], lora: string | null): WorkerMatch[] {
    const root = lora ?? "";
    const n = Math.floor(tokens.length / this.blockSize);
    const all = [...this.workers.keys()].sort().map((worker) => {
      const held = this.workers.get(worker)!;
      const tiersOf = (id: string): Set<Tier> => {
        const s = new Set<Tier>();
        for (const h of held.values()) if (h.node === id) for (const t of h.tiers) s.add(t);
        return s;
      };
      const run = (ok: (tiers: Set<Tier>) => boolean): number => {
        let i = 0;
        while (i < n && ok(tiersOf(nodeId(root, tokens.slice(0, (i + 1) * this.blockSize))))) i++;
        return i;
      };
      return {
        worker,
        gpu: run((s) => s.has("gpu")),
        host: run((s) => s.has("gpu") || s.has("host")),
        disk: run((s) => s.size > 0),
        totalBlocks: new Set([...held.values()].map((h) => h.node)).size,
      };
    });
    // Only workers that hold the first block are reported (absent = no match).
    return all.filter((m) => m.disk > 0);
  }

  stats(): IndexStats {
    let workerBlocks = 0;
    for (const held of this.workers.values()) {
      workerBlocks += new Set([...held.values()].map((h) => h.node)).size;
    }
    return {
      nodes: this.nodes.size,
      workers: this.workers.size,
      workerBlocks,
      outcomes: { ...this.outcomes },
      reclaimPendingBlocks: 0,
      capEvictions: 0,
      overflowResets: 0,
    };
  }

  #apply(
    held: Map<EngineBlockHash, Holding>,
    reused: Set<EngineBlockHash>,
    event: KvEvent,
  ): ApplyResult {
    const ok = (status: ApplyStatus, unknownHashes = 0): ApplyResult => ({
      status,
      unknownHashes,
    });
    switch (event.type) {
      case "cleared":
        held.clear();
        reused.clear();
        return ok("applied");
      case "removed": {
        let unknown = 0;
        for (const hash of event.blockHashes) {
          const h = held.get(hash);
          if (h === undefined || !h.tiers.has(event.tier)) {
            unknown++;
            continue;
          }
          const extra = h.copies.get(event.tier) ?? 0;
          if (extra > 0) {
            h.copies.set(event.tier, extra - 1);
            continue;
          }
          h.tiers.delete(event.tier);
          if (h.tiers.size === 0) held.delete(hash);
        }
        return unknown > 0 ? ok("block_not_found", unknown) : ok("applied");
      }
      case "stored": {
        const bs = this.blockSize;
        if (event.tokenIds.length === 0) {
          let unknown = 0;
          for (const hash of event.blockHashes) {
            const h = held.get(hash);
            if (h === undefined) unknown++;
            else h.tiers.add(event.tier);
          }
          return unknown > 0 ? ok("block_not_found", unknown) : ok("applied");
        }
        if (event.blockSize !== bs) return ok("block_size_mismatch");
        if (event.tokenIds.length !== event.blockHashes.length * bs) {
          return ok("invalid_token_count");
        }
        let parent: ModelNode | null = null;
        let lora = event.loraName || (event.loraId ? `\u0000lora_id:${event.loraId}` : "");
        let prefix: number[] = [];
        if (event.parentHash !== null) {
          const p = held.get(event.parentHash);
          if (p === undefined) return ok("parent_not_found");
          if (this.ambiguousParents && reused.has(event.parentHash)) {
            return ok("parent_ambiguous");
          }
          parent = this.nodes.get(p.node)!;
          lora = parent.lora;
          prefix = parent.tokens;
        }
        let parentId = parent === null ? null : nodeId(lora, prefix);
        const tokens = Array.from(event.tokenIds);
        event.blockHashes.forEach((hash, i) => {
          prefix = [...prefix, ...tokens.slice(i * bs, (i + 1) * bs)];
          const id = nodeId(lora, prefix);
          if (!this.nodes.has(id)) this.nodes.set(id, { lora, tokens: prefix, parent: parentId });
          const h = held.get(hash);
          if (h !== undefined && h.node === id) {
            if (h.tiers.has(event.tier)) {
              h.copies.set(event.tier, (h.copies.get(event.tier) ?? 0) + 1);
            } else h.tiers.add(event.tier);
          } else {
            if (h !== undefined) reused.add(hash);
            held.set(hash, { node: id, tiers: new Set([event.tier]), copies: new Map() });
          }
          parentId = id;
        });
        return ok("applied");
      }
    }
  }

  /** Drops nodes that nobody holds and that have no children, until none is left. */
  #prune(): void {
    for (;;) {
      const used = new Set<string>();
      for (const held of this.workers.values()) for (const h of held.values()) used.add(h.node);
      for (const n of this.nodes.values()) if (n.parent !== null) used.add(n.parent);
      const dead = [...this.nodes.keys()].filter((id) => !used.has(id));
      if (dead.length === 0) return;
      for (const id of dead) this.nodes.delete(id);
    }
  }
}
