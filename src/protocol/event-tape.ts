/**
 * A decoded batch as a few flat typed arrays (an "event tape") instead of `KvEvent`
 * objects: a decode thread hands it to the main thread by transfer (no structured clone
 * of one object and one hash string per block), and the index applies it from the
 * hashes' 64-bit (hi, lo) words without parsing strings back
 * (`RadixTreeIndex.applyStoredWords`).
 *
 * Written by `decodeEventTape` (vllm-codec.ts) for batches whose hashes are all
 * integers (vLLM's default); other batches keep the object form. A tape holds what the
 * `KvEvent`s would, and `tapeEvent` gives them back.
 */

import type { EngineBlockHash } from "./engine-hash.js";
import { engineHashFromU32Pair } from "./engine-hash.js";
import { type KvEvent, TIERS, type Tier } from "./events.js";

/** Event kinds on a tape. */
export const TAPE_STORED = 0;
export const TAPE_REMOVED = 1;
export const TAPE_CLEARED = 2;
const TYPE_NAMES = ["stored", "removed", "cleared"] as const;

/**
 * Per event, in `records`: kind, tier index, block count, first hash pair, parent pair
 * (−1 = none), token offset, token count, block size, LoRA id (NaN = null), LoRA name
 * and medium as indexes into `strings` (−1 = null).
 */
export const F_KIND = 0;
export const F_TIER = 1;
export const F_COUNT = 2;
export const F_PAIR = 3;
export const F_PARENT = 4;
export const F_TOKENS = 5;
export const F_TOKEN_COUNT = 6;
export const F_BLOCK_SIZE = 7;
export const F_LORA_ID = 8;
export const F_LORA_NAME = 9;
export const F_MEDIUM = 10;
export const TAPE_FIELDS = 11;

/**
 * The arrays behind the tapes of one or more batches (several batches share them, so
 * a group of batches crosses threads as three transferable buffers).
 */
export interface TapeArrays {
  readonly records: Float64Array;
  /** Hashes as (hi, lo) pairs: block hashes and parents. Indexes are absolute. */
  readonly words: Uint32Array;
  /** Token ids of stored events. Offsets are absolute. */
  readonly tokens: Uint32Array;
  /** LoRA names and media, referenced by index from `records`. */
  readonly strings: readonly string[];
}

/** One batch's events: records `[first, first + events)` of `arrays`. */
export interface EventTape {
  readonly first: number;
  readonly events: number;
  readonly ts: number;
  readonly dpRank: number | null;
  /** Set by the writer's `finish` (shared by every tape written since `reset`). */
  arrays: TapeArrays;
}

const NO_ARRAYS: TapeArrays = {
  records: new Float64Array(0),
  words: new Uint32Array(0),
  tokens: new Uint32Array(0),
  strings: [],
};

const INITIAL_RECORDS = 64 * TAPE_FIELDS;
const INITIAL_WORDS = 1024;
const INITIAL_TOKENS = 4096;

/**
 * Writes the tapes of a group of batches into growable buffers: `reset`, then per batch
 * `mark` + (events…) + `endTape` or `rollback`, then `finish` copies the buffers to
 * exact size and gives them to the group's tapes.
 */
export class TapeWriter {
  events = 0;
  records = new Float64Array(INITIAL_RECORDS);
  pairs = 0;
  words = new Uint32Array(INITIAL_WORDS);
  tokenCount = 0;
  tokens = new Uint32Array(INITIAL_TOKENS);
  strings: string[] = [];
  #tapes: EventTape[] = [];
  #markEvents = 0;
  #markPairs = 0;
  #markTokens = 0;

  /** Empties the writer for the next group (its buffers are kept). */
  reset(): void {
    this.events = 0;
    this.pairs = 0;
    this.tokenCount = 0;
    this.strings = [];
    this.#tapes = [];
    this.mark();
  }

  /** A batch starts here. */
  mark(): void {
    this.#markEvents = this.events;
    this.#markPairs = this.pairs;
    this.#markTokens = this.tokenCount;
  }

  /** Drops what was written since `mark` (the batch failed). */
  rollback(): void {
    this.events = this.#markEvents;
    this.pairs = this.#markPairs;
    this.tokenCount = this.#markTokens;
  }

  /** The batch since `mark` as a tape (its arrays come with `finish`). */
  endTape(ts: number, dpRank: number | null): EventTape {
    const first = this.#markEvents;
    const tape: EventTape = { first, events: this.events - first, ts, dpRank, arrays: NO_ARRAYS };
    this.#tapes.push(tape);
    this.mark();
    return tape;
  }

  /** Appends a hash pair; returns its index. */
  pushPair(hi: number, lo: number): number {
    if (2 * this.pairs + 2 > this.words.length) this.words = grow(this.words, 2 * this.pairs + 2);
    this.words[2 * this.pairs] = hi;
    this.words[2 * this.pairs + 1] = lo;
    return this.pairs++;
  }

  /** Room for `n` more tokens at `tokenCount`; returns the buffer to write them to. */
  reserveTokens(n: number): Uint32Array {
    const need = this.tokenCount + n;
    if (need > this.tokens.length) this.tokens = grow(this.tokens, need);
    return this.tokens;
  }

  /** A new event record (fields preset to "none"); returns its offset in `records`. */
  addEvent(kind: number): number {
    const o = this.events * TAPE_FIELDS;
    if (o + TAPE_FIELDS > this.records.length) this.records = grow(this.records, o + TAPE_FIELDS);
    const r = this.records;
    r[o + F_KIND] = kind;
    r[o + F_TIER] = 0;
    r[o + F_COUNT] = 0;
    r[o + F_PAIR] = 0;
    r[o + F_PARENT] = -1;
    r[o + F_TOKENS] = 0;
    r[o + F_TOKEN_COUNT] = 0;
    r[o + F_BLOCK_SIZE] = 0;
    r[o + F_LORA_ID] = Number.NaN;
    r[o + F_LORA_NAME] = -1;
    r[o + F_MEDIUM] = -1;
    this.events++;
    return o;
  }

  /** Index of `s` in the side table (−1 for null). */
  stringIndex(s: string | null): number {
    if (s === null) return -1;
    const i = this.strings.lastIndexOf(s);
    return i >= 0 ? i : this.strings.push(s) - 1;
  }

  /** Exact-size copies of the group's buffers, now the `arrays` of its tapes. */
  finish(): TapeArrays {
    const arrays: TapeArrays = {
      records: this.records.slice(0, this.events * TAPE_FIELDS),
      words: this.words.slice(0, 2 * this.pairs),
      tokens: this.tokens.slice(0, this.tokenCount),
      strings: this.strings,
    };
    for (const t of this.#tapes) t.arrays = arrays;
    this.#tapes = [];
    return arrays;
  }

  /**
   * Like `finish`, but without copies: the writer's own buffers become the group's
   * arrays (whole, so longer than written), and the writer goes on with `next` (buffers
   * handed back by an earlier group's reader) or, when null, fresh ones. For a writer
   * whose groups are transferred to another thread and given back (the decode thread).
   */
  take(next: TapeBuffers | null): TapeArrays {
    const arrays: TapeArrays = {
      records: this.records,
      words: this.words,
      tokens: this.tokens,
      strings: this.strings,
    };
    for (const t of this.#tapes) t.arrays = arrays;
    this.#tapes = [];
    this.records = next?.records ?? new Float64Array(INITIAL_RECORDS);
    this.words = next?.words ?? new Uint32Array(INITIAL_WORDS);
    this.tokens = next?.tokens ?? new Uint32Array(INITIAL_TOKENS);
    return arrays;
  }
}

/**
 * The writer's buffers themselves, not copies: what `take` hands over and `adopt`
 * takes back. Lengths are capacities; the tapes say which part is written.
 */
export interface TapeBuffers {
  readonly records: Float64Array<ArrayBuffer>;
  readonly words: Uint32Array<ArrayBuffer>;
  readonly tokens: Uint32Array<ArrayBuffer>;
}

function grow<T extends Float64Array | Uint32Array>(a: T, need: number): T {
  let n = a.length * 2;
  while (n < need) n *= 2;
  const b = new (a.constructor as new (n: number) => T)(n);
  b.set(a);
  return b;
}

/** The buffers to list in `postMessage`'s transfer list. */
export function tapeTransferables(arrays: TapeArrays): ArrayBuffer[] {
  return [arrays.records.buffer, arrays.words.buffer, arrays.tokens.buffer] as ArrayBuffer[];
}

/** Event `i`'s type. */
export function tapeEventType(tape: EventTape, i: number): KvEvent["type"] {
  return TYPE_NAMES[tape.arrays.records[(tape.first + i) * TAPE_FIELDS + F_KIND]!]!;
}

/** Event `i`'s tier (stored and removed events). */
export function tapeEventTier(tape: EventTape, i: number): Tier {
  return TIERS[tape.arrays.records[(tape.first + i) * TAPE_FIELDS + F_TIER]!]!;
}

/** Event `i` of the tape as the `KvEvent` it stands for. */
export function tapeEvent(tape: EventTape, i: number): KvEvent {
  const { records: r, words: w, tokens, strings } = tape.arrays;
  const o = (tape.first + i) * TAPE_FIELDS;
  const kind = r[o + F_KIND]!;
  if (kind === TAPE_CLEARED) return { type: "cleared" };
  const hashAt = (p: number) => engineHashFromU32Pair(w[2 * p]!, w[2 * p + 1]!);
  const first = r[o + F_PAIR]!;
  const blockHashes: EngineBlockHash[] = [];
  for (let h = 0; h < r[o + F_COUNT]!; h++) blockHashes.push(hashAt(first + h));
  const str = (f: number) => (r[o + f]! < 0 ? null : strings[r[o + f]!]!);
  const tier = tapeEventTier(tape, i);
  const medium = str(F_MEDIUM);
  if (kind === TAPE_REMOVED) return { type: "removed", blockHashes, medium, tier };
  const parent = r[o + F_PARENT]!;
  const tokenOffset = r[o + F_TOKENS]!;
  const loraId = r[o + F_LORA_ID]!;
  return {
    type: "stored",
    blockHashes,
    parentHash: parent < 0 ? null : hashAt(parent),
    tokenIds: tokens.subarray(tokenOffset, tokenOffset + r[o + F_TOKEN_COUNT]!),
    blockSize: r[o + F_BLOCK_SIZE]!,
    loraId: Number.isNaN(loraId) ? null : loraId,
    loraName: str(F_LORA_NAME),
    medium,
    tier,
  };
}
