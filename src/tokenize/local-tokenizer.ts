/**
 * `LocalTokenizer`: engine-equivalent tokenization in-process from a model directory.
 * Completion prompts get the ids the engine adds around them (BOS when the config says so);
 * chat requests are rendered as vLLM renders them and encoded without special tokens. In
 * "segmented" mode text is split at added tokens and each segment's ids come from an LRU
 * cache, so a multi-turn chat re-encodes only its new turn; "whole" mode (for tokenizers
 * that fail the load-time probe) encodes the text in one go. Large uncached text is encoded
 * on worker threads when `threads > 0`.
 */

import { basename } from "node:path";
import { ChatRenderer } from "./chat-render.js";
import { EncodePool, type PoolState } from "./encode-pool.js";
import { HfEncoder } from "./hf-encoder.js";
import { loadModelFiles, type ModelFiles } from "./model-files.js";
import { SegmentCache, type SegmentCacheStats } from "./segment-cache.js";
import { type ProbeOutcome, probeSegmentParity } from "./segment-probe.js";
import { buildSplitter, type Splitter } from "./segmenter.js";
import {
  type ChatRequestLike,
  type PromptTokenizer,
  TokenizeError,
  type TokenizeResult,
} from "./types.js";

export interface LocalTokenizerOptions {
  /** Served model name (default: the directory's name). */
  readonly model?: string;
  /** Segment cache bound in bytes; 0 disables the cache. */
  readonly segmentCacheBytes?: number;
  /** "auto": segmented when the probe holds; "whole": never split. */
  readonly mode?: "auto" | "whole";
  /** Worker threads for large texts; 0 = always encode on the calling thread. */
  readonly threads?: number;
  /** Uncached characters in one request from which its encoding goes to a worker. */
  readonly offThreadMinChars?: number;
}

export const DEFAULT_LOCAL_TOKENIZER_OPTIONS = Object.freeze({
  segmentCacheBytes: 64 * 1024 * 1024,
  mode: "auto" as const,
  threads: 1,
  offThreadMinChars: 64 * 1024,
});

export type EncodeMode = "segmented" | "whole";

export class LocalTokenizer implements PromptTokenizer {
  readonly model: string;
  readonly files: ModelFiles;
  readonly mode: EncodeMode;
  readonly probe: ProbeOutcome | null;
  readonly #encoder: HfEncoder;
  readonly #renderer: ChatRenderer;
  readonly #split: Splitter;
  readonly #cache: SegmentCache | null;
  readonly #pool: EncodePool | null;
  readonly #offThreadMinChars: number;
  #closed = false;

  constructor(files: ModelFiles, options: LocalTokenizerOptions = {}) {
    const o = { ...DEFAULT_LOCAL_TOKENIZER_OPTIONS, ...options };
    this.files = files;
    this.model = o.model ?? basename(files.dir);
    this.#encoder = new HfEncoder(files);
    this.#renderer = new ChatRenderer(files);
    this.#split = buildSplitter(files.addedTokens);
    this.probe =
      o.mode === "whole"
        ? null
        : probeSegmentParity(files.addedTokens, this.#split, (t) => this.#encoder.encode(t));
    this.mode = this.probe?.holds === true ? "segmented" : "whole";
    this.#cache =
      this.mode === "segmented" && o.segmentCacheBytes > 0
        ? new SegmentCache(o.segmentCacheBytes)
        : null;
    this.#pool = o.threads > 0 ? new EncodePool(files.dir, o.threads) : null;
    this.#offThreadMinChars = o.offThreadMinChars;
  }

  async tokenizeCompletion(prompt: string): Promise<TokenizeResult> {
    if (typeof prompt !== "string")
      throw new TokenizeError("bad_request", "'prompt' must be a string");
    const body = await this.#encodeText(prompt);
    return {
      tokenIds: [...this.#encoder.prefix, ...body.tokenIds, ...this.#encoder.suffix],
      cachedSegments: body.cachedSegments,
    };
  }

  async tokenizeChat(request: ChatRequestLike): Promise<TokenizeResult> {
    return this.#encodeText(this.renderChat(request));
  }

  /** The prompt text vLLM renders for a chat request. */
  renderChat(request: ChatRequestLike): string {
    this.#checkOpen();
    return this.#renderer.render(request);
  }

  /** Ids of `text` with no special tokens added; synchronous, on this thread, uncached. */
  encodeSync(text: string): number[] {
    return this.#encoder.encode(text);
  }

  /** Completion prompt ids, synchronous, on this thread (for the simulator). */
  encodeCompletionSync(prompt: string): number[] {
    return [...this.#encoder.prefix, ...this.#encoder.encode(prompt), ...this.#encoder.suffix];
  }

  decode(ids: readonly number[], skipSpecialTokens = false): string {
    return this.#encoder.decode(ids, skipSpecialTokens);
  }

  /** The worker pool's state (all zero without threads). */
  poolState(): PoolState {
    return this.#pool?.state() ?? { started: 0, ready: 0, jobs: 0 };
  }

  cacheStats(): SegmentCacheStats | null {
    return this.#cache?.stats() ?? null;
  }

  async close(): Promise<void> {
    this.#closed = true;
    await this.#pool?.close();
  }

  #checkOpen(): void {
    if (this.#closed) throw new TokenizeError("closed", `tokenizer for ${this.model} is closed`);
  }

  async #encodeText(text: string): Promise<TokenizeResult> {
    this.#checkOpen();
    if (this.mode === "whole") {
      const off =
        text.length >= this.#offThreadMinChars ? this.#pool?.tryEncode([text]) : undefined;
      const ids = off ? Array.from((await off)[0]!) : this.#encoder.encode(text);
      return { tokenIds: ids, cachedSegments: 0 };
    }
    const c = this.#collect(text);
    if (c.missing.length === 0) return this.#finish(c, []);
    const off = c.missingChars >= this.#offThreadMinChars ? this.#pool?.tryEncode(c.missing) : null;
    return this.#finish(c, off ? await off : c.missing.map((t) => this.#encoder.encode(t)));
  }

  /**
   * A chat's ids on this thread, through the segment cache (the simulator: an engine that
   * re-encodes a conversation's history every turn would dominate its CPU otherwise).
   */
  encodeChatSync(request: ChatRequestLike): number[] {
    const text = this.renderChat(request);
    if (this.mode === "whole") return this.#encoder.encode(text);
    const c = this.#collect(text);
    return [
      ...this.#finish(
        c,
        c.missing.map((t) => this.#encoder.encode(t)),
      ).tokenIds,
    ];
  }

  /** Split at added tokens; look each distinct text segment up in the cache. */
  #collect(text: string): Collected {
    const pieces = this.#split(text);
    const found = new Map<string, ArrayLike<number>>();
    const missing: string[] = [];
    const missingSet = new Set<string>();
    let missingChars = 0;
    let cached = 0;
    for (const p of pieces) {
      if (p.kind !== "text" || found.has(p.text)) continue;
      const hit = this.#cache?.get(p.text);
      if (hit !== undefined) {
        found.set(p.text, hit);
        cached++;
      } else if (!missingSet.has(p.text)) {
        missingSet.add(p.text);
        missing.push(p.text);
        missingChars += p.text.length;
      }
    }
    return { pieces, found, missing, missingChars, cached };
  }

  /** Cache the newly encoded segments and lay the ids out in order. */
  #finish(c: Collected, encoded: readonly ArrayLike<number>[]): TokenizeResult {
    c.missing.forEach((t, i) => {
      const ids = encoded[i]!;
      c.found.set(t, ids);
      this.#cache?.set(t, ids);
    });
    const out: number[] = [];
    for (const p of c.pieces) {
      if (p.kind === "token") out.push(p.id);
      else {
        const ids = c.found.get(p.text)!;
        for (let i = 0; i < ids.length; i++) out.push(ids[i]!);
      }
    }
    return { tokenIds: out, cachedSegments: c.cached };
  }
}

interface Collected {
  readonly pieces: ReturnType<Splitter>;
  readonly found: Map<string, ArrayLike<number>>;
  readonly missing: string[];
  readonly missingChars: number;
  readonly cached: number;
}

/** Load a model directory (`tokenizer.json` + `tokenizer_config.json`) as a `LocalTokenizer`. */
export async function loadModelTokenizer(
  dir: string,
  options: LocalTokenizerOptions = {},
): Promise<LocalTokenizer> {
  return new LocalTokenizer(loadModelFiles(dir), options);
}
