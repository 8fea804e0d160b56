/**
 * The engine-event-fed view a "precise" peer router keeps (llm-d's precise prefix-cache
 * scorer, Dynamo's KvIndexer, production-stack's LMCache controller): the workers' KV
 * events applied to a prefix index, asked for the longest consecutive prefix each worker
 * holds. It reuses our radix tree as the data structure, which answers exactly that
 * question; the peers differ in what they do with the answer, not in the answer.
 */

import { RadixTreeIndex } from "../../index/radix-tree.js";
import type { BlockKeySeq } from "../../index/types.js";
import type { KvEvent } from "../../protocol/events.js";
import { type WorkerKey, workerKey } from "../../protocol/worker.js";

export class EventPrefixView {
  readonly #index: RadixTreeIndex;
  readonly #keys: WorkerKey[];
  readonly #slot = new Map<WorkerKey, number>();
  /** Events the index did not apply cleanly (should stay 0). */
  problems = 0;

  constructor(workers: number, blockSize: number) {
    this.#index = new RadixTreeIndex({ blockSize });
    this.#keys = Array.from({ length: workers }, (_, w) => workerKey(`sim-${w}`));
    for (let w = 0; w < workers; w++) this.#slot.set(this.#keys[w]!, w);
  }

  get blockSize(): number {
    return this.#index.blockSize;
  }

  apply(w: number, event: KvEvent): void {
    if (this.#index.applyEvent(this.#keys[w]!, event).status !== "applied") this.problems++;
  }

  /**
   * Leading blocks of `keys` each worker holds in GPU memory, written into `out`
   * (length = workers); also returns each worker's total blocks held in `totals` if given.
   */
  longestPrefix(keys: BlockKeySeq, out: Int32Array, totals?: Int32Array): void {
    out.fill(0);
    // findMatches lists only the workers holding some of the prompt; totals are per worker.
    if (totals !== undefined) {
      for (let w = 0; w < this.#keys.length; w++)
        totals[w] = this.#index.workerBlocks(this.#keys[w]!);
    }
    for (const m of this.#index.findMatches(keys).workers) {
      const w = this.#slot.get(m.worker);
      if (w !== undefined) out[w] = m.gpu;
    }
  }
}
