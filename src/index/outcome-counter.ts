/**
 * Counts every applyEvent outcome as `${type}/${status}` without building a string per
 * event (a fixed table of counters; the record is built only when `stats()` asks).
 * The one such table: the index keeps one for all workers, each event stream one for
 * its worker (`ingest/stream-state.ts`).
 */

import type { KvEvent } from "../protocol/events.js";
import type { ApplyStatus } from "./types.js";

const EVENT_TYPES: readonly KvEvent["type"][] = ["stored", "removed", "cleared"];
const STATUSES: readonly ApplyStatus[] = [
  "applied",
  "parent_not_found",
  "block_not_found",
  "block_size_mismatch",
  "invalid_token_count",
  "parent_ambiguous",
];

export class OutcomeCounter {
  readonly #counts = new Float64Array(EVENT_TYPES.length * STATUSES.length);

  count(type: KvEvent["type"], status: ApplyStatus): void {
    this.#counts[typeIndex(type) * STATUSES.length + statusIndex(status)]!++;
  }

  /** Non-zero counters as `${type}/${status}` → count. */
  toRecord(): Record<string, number> {
    const out: Record<string, number> = {};
    for (let t = 0; t < EVENT_TYPES.length; t++) {
      for (let s = 0; s < STATUSES.length; s++) {
        const v = this.#counts[t * STATUSES.length + s]!;
        if (v > 0) out[`${EVENT_TYPES[t]}/${STATUSES[s]}`] = v;
      }
    }
    return out;
  }
}

function typeIndex(type: KvEvent["type"]): number {
  switch (type) {
    case "stored":
      return 0;
    case "removed":
      return 1;
    case "cleared":
      return 2;
    default: {
      const unknown: never = type;
      throw new TypeError(`unknown event type ${String(unknown)}`);
    }
  }
}

function statusIndex(status: ApplyStatus): number {
  switch (status) {
    case "applied":
      return 0;
    case "parent_not_found":
      return 1;
    case "block_not_found":
      return 2;
    case "block_size_mismatch":
      return 3;
    case "invalid_token_count":
      return 4;
    case "parent_ambiguous":
      return 5;
    default: {
      const unknown: never = status;
      throw new TypeError(`unknown status ${String(unknown)}`);
    }
  }
}
