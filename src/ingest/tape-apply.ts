/**
 * Applies an event tape (protocol/event-tape.ts) to a prefix index: through the index's
 * word entry points when it has them (`RadixTreeIndex`), else event by event as the
 * `KvEvent`s the tape stands for, so any `PrefixIndex` gets the same outcomes.
 */

import type {
  ApplyResult,
  HashWords,
  PrefixIndex,
  TokenWords,
  WordsIndex,
} from "../index/types.js";
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

/** One reusable view of a tape event for the index's word entry points (read per call). */
const view: {
  hashes: HashWords;
  first: number;
  count: number;
  tier: Tier;
  parentPair: number;
  tokens: TokenWords;
  tokenOffset: number;
  tokenCount: number;
  blockSize: number;
  loraName: string | null;
  loraId: number | null;
} = {
  hashes: new Uint32Array(0) as HashWords,
  first: 0,
  count: 0,
  tier: "gpu",
  parentPair: -1,
  tokens: new Uint32Array(0) as TokenWords,
  tokenOffset: 0,
  tokenCount: 0,
  blockSize: 0,
  loraName: null,
  loraId: null,
};

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
  // The tape's two word arrays: hashes as (hi, lo) pairs, and token ids.
  view.hashes = words as HashWords;
  view.first = r[o + F_PAIR]!;
  view.count = r[o + F_COUNT]!;
  view.tier = tapeEventTier(tape, i);
  if (kind === TAPE_REMOVED) return index.applyRemovedWords(worker, view);
  const loraId = r[o + F_LORA_ID]!;
  const loraName = r[o + F_LORA_NAME]!;
  view.parentPair = r[o + F_PARENT]!;
  view.tokens = tokens as TokenWords;
  view.tokenOffset = r[o + F_TOKENS]!;
  view.tokenCount = r[o + F_TOKEN_COUNT]!;
  view.blockSize = r[o + F_BLOCK_SIZE]!;
  view.loraName = loraName < 0 ? null : strings[loraName]!;
  view.loraId = Number.isNaN(loraId) ? null : loraId;
  return index.applyStoredWords(worker, view);
}
