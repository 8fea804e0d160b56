/**
 * What the radix tree exposes to its snapshot codec (`snapshot-codec.ts`): a cheap,
 * consistent copy of its tables (`capture`, taken between two events) and the two steps
 * that rebuild it (`restoreNode`, `restoreEntry`) on an empty index. The layout of the
 * copied records is described by `NODE_LAYOUT` (node-store.ts) and `ENTRY_LAYOUT`
 * (engine-hash-table.ts); the codec's file format does not depend on it.
 */

import type { WorkerKey } from "../protocol/worker.js";

export interface IndexCapture {
  readonly blockSize: number;
  /** Node records, `NODE_LAYOUT`. */
  readonly nodes: Uint32Array;
  /** Entry records, `ENTRY_LAYOUT`; live entries chain from `oldest` (id, −1 = none). */
  readonly entries: Uint32Array;
  readonly oldest: number;
  /** Worker key per slot; undefined for slots cleared (their entries are not saved). */
  readonly workers: readonly (WorkerKey | undefined)[];
  /** Interned hash string per id (entries of kind 1 keep the id in `lo`). */
  readonly strings: (id: number) => string | undefined;
  /** Extra copies: `entry * 8 + tier bit` → count (see radix-tree.ts). */
  readonly copies: ReadonlyMap<number, number>;
}

export interface CaptureJob {
  step(words: number): boolean;
  finish(): IndexCapture | null;
}

export interface SnapshotAccess {
  /**
   * A copy as of now. The copy's buffers are reused by the next `capture` of the same
   * access object: encode one capture before taking the next.
   */
  capture(): IndexCapture;
  /**
   * The same copy in steps, so that no single pause copies tens of MB: `step(words)`
   * copies about that many more words and says whether any remain; `finish()` gives the
   * capture, or null if the index changed since `beginCapture` (the copy is then mixed:
   * take another). Shares `capture`'s buffers.
   */
  beginCapture(): CaptureJob;
  /**
   * The buffers the next `capture` copies into, sized for now. Touching their pages
   * beforehand, a slice per event-loop turn, keeps page faults out of the capture's
   * single pause (a fresh 50 MB copy took ~110 ms, a copy into mapped pages a fraction).
   */
  prepare(): Uint32Array[];
  /** Node for key (hi, lo) under `parent` (−1 = a root), created if missing. */
  restoreNode(hi: number, lo: number, parent: number): number;
  /**
   * Worker `worker` holds `node` in tiers `mask` under engine hash (hi, lo) (an integer
   * hash) or `str` (an interned one), with `copies[t]` extra copies of tier bit 1 << t.
   */
  restoreEntry(
    worker: WorkerKey,
    node: number,
    mask: number,
    hi: number,
    lo: number,
    str: string | null,
    copies: readonly number[] | null,
  ): void;
}
