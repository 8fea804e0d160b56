/**
 * Which workers hold a node, in which tiers, derived from their engine-hash entries. A
 * worker usually holds a node under one engine hash: its holder word then mirrors that
 * entry's tiers. Under several hashes (see alias-counts.ts) the word carries the alias
 * bit and the union of tiers still held. Also keeps each worker's distinct block count
 * and its count of entries in the GPU tier (what the engine's capacity bounds).
 *
 * Holder word: `worker << 4 | ALIASED? | tier bits` (1 = GPU, 2 = host, 4 = disk).
 */

import { AliasCounts } from "./alias-counts.js";
import type { NodeStore } from "./node-store.js";
import type { WorkerSlots } from "./worker-slots.js";

// Kept module-local: imported bindings can become getter calls under some loaders (tsx).
const ALIASED = 8;
const TIER_BITS = 7;
const GPU = 1;

export class Holdings {
  /** Sum over workers of distinct blocks held. */
  total = 0;
  readonly #nodes: NodeStore;
  readonly #aliases = new AliasCounts();
  readonly #slots: WorkerSlots;

  /** Counts go to `slots`' per-slot columns (re-read each time: they grow). */
  constructor(nodes: NodeStore, slots: WorkerSlots) {
    this.#nodes = nodes;
    this.#slots = slots;
  }

  /**
   * A new engine-hash entry of worker `w`, with tiers `mask`, points at `node`. All or
   * nothing: when the holder pool is full, `addHolder` throws before anything changed.
   */
  attach(node: number, w: number, mask: number): void {
    const nodes = this.#nodes;
    const k = nodes.holderIndex(node, w);
    if (k < 0) {
      nodes.addHolder(node, (w << 4) | mask);
      this.#slots.gpuEntries[w]! += mask & GPU;
      this.#slots.blocks[w]!++;
      this.total++;
      return;
    }
    const word = nodes.holderWord(node, k);
    const union =
      word & ALIASED
        ? this.#aliases.change(node, w, 0, mask)
        : this.#aliases.start(node, w, word & TIER_BITS, mask);
    nodes.setHolderWord(node, k, (w << 4) | ALIASED | union);
    this.#slots.gpuEntries[w]! += mask & GPU;
  }

  /** One existing entry of worker `w` on `node` changes tiers `from` → `to` (0 = gone). */
  change(node: number, w: number, from: number, to: number): void {
    const nodes = this.#nodes;
    this.#slots.gpuEntries[w]! += (to & GPU) - (from & GPU);
    const k = nodes.holderIndex(node, w);
    const word = nodes.holderWord(node, k);
    if ((word & ALIASED) === 0) {
      if (to !== 0) {
        nodes.setHolderWord(node, k, (w << 4) | to);
        return;
      }
      nodes.removeHolder(node, k);
      this.#slots.blocks[w]!--;
      this.total--;
      return;
    }
    const r = this.#aliases.change(node, w, from, to);
    nodes.setHolderWord(node, k, r >= 0 ? (w << 4) | ALIASED | r : (w << 4) | (-1 - r));
  }
}
