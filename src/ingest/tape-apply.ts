/**
 * Applies an event tape (protocol/event-tape.ts) to a prefix index: through the index's
 * word entry points when it has them (`RadixTreeIndex`), else event by event as the
 * `KvEvent`s the tape stands for, so any `PrefixIndex` gets the same outcomes.
 */

import type { ApplyResult, PrefixIndex } from "../index/types.js";
import {
  type EventTape,
  F_BLOCK_SIZE,
  F_COUNT,
  F_KIND,
  F_LORA_ID,
  F_LORA_NAME,
  F_PAIR,
  F_PARENT,
  F_TOKEN_COUNT,
  F_TOKENS,
  TAPE_CLEARED,
  TAPE_FIELDS,
  TAPE_REMOVED,
  tapeEvent,
  tapeEventTier,
} from "../protocol/event-tape.js";
import type { Tier } from "../protocol/events.js";
import type { WorkerKey } from "../protocol/worker.js";

/** Index entry points for events whose hashes are 64-bit integers given as words. */
export interface WordsIndex {
  applyStoredWords(
    worker: WorkerKey,
    words: Uint32Array,
    pair: number,
    count: number,
    parentPair: number,
    tokens: Uint32Array,
    tokenOffset: number,
    tokenCount: number,
    blockSize: number,
    tier: Tier,
    loraName: string | null,
    loraId: number | null,
  ): ApplyResult;
  applyRemovedWords(
    worker: WorkerKey,
    words: Uint32Array,
    pair: number,
    count: number,
    tier: Tier,
  ): ApplyResult;
}

/** True if `index` has the word entry points. */
export function hasWords(index: PrefixIndex): index is PrefixIndex & WordsIndex {
  const i = index as Partial<WordsIndex>;
  return typeof i.applyStoredWords === "function" && typeof i.applyRemovedWords === "function";
}

/** Applies event `i` of the tape to `index` for `worker`, like `applyEvent` would. */
export function applyTapeEvent(
  index: PrefixIndex,
  worker: WorkerKey,
  tape: EventTape,
  i: number,
): ApplyResult {
  const { records: r, words, tokens, strings } = tape.arrays;
  const o = (tape.first + i) * TAPE_FIELDS;
  const kind = r[o + F_KIND]!;
  if (kind === TAPE_CLEARED || !hasWords(index)) {
    return index.applyEvent(worker, tapeEvent(tape, i));
  }
  const tier = tapeEventTier(tape, i);
  if (kind === TAPE_REMOVED) {
    return index.applyRemovedWords(worker, words, r[o + F_PAIR]!, r[o + F_COUNT]!, tier);
  }
  const loraId = r[o + F_LORA_ID]!;
  const loraName = r[o + F_LORA_NAME]!;
  return index.applyStoredWords(
    worker,
    words,
    r[o + F_PAIR]!,
    r[o + F_COUNT]!,
    r[o + F_PARENT]!,
    tokens,
    r[o + F_TOKENS]!,
    r[o + F_TOKEN_COUNT]!,
    r[o + F_BLOCK_SIZE]!,
    tier,
    loraName < 0 ? null : strings[loraName]!,
    Number.isNaN(loraId) ? null : loraId,
  );
}
