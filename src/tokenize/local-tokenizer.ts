/**
 * `LocalTokenizer`: engine-equivalent tokenization in-process from a model directory.
 * Completion prompts get the ids the engine adds around them (BOS when the config says so);
 * chat requests are rendered as vLLM renders them and encoded without special tokens. In
 * "segmented" mode text is split at added tokens and each segment's ids come from an LRU
 * cache, so a multi-turn chat re-encodes only its new turn; "whole" mode (for tokenizers
 * that fail the load-time probe) encodes the text in one go. With `threads > 0`, each
 * request is tokenized whole on a worker thread (`requestsOffThread`, the default: the
 * caller's event loop keeps none of it) or only its large uncached text is.
 *
 * Long file: the three ways a request is tokenized (whole on a thread, segmented here,
 * whole text here) share the segment cache, the splitter and the special tokens.
 */

import { basename } from "node:path";
import { ChatRenderer } from "./chat-render.js";
import { EncodePool, type PoolState } from "./encode-pool.js";
import type { RequestJob } from "./encode-worker.js";
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
  /**
   * With threads: tokenize every request whole on a worker (template, segment cache and
   * encoding there; the caller's thread only posts it), so tokenization and the rest of
   * the gateway's work run on different cores. False: only `offThreadMinChars` applies.
   */
  readonly requestsOffThread?: boolean;
}

export const DEFAULT_LOCAL_TOKENIZER_OPTIONS = Object.freeze({
  segmentCacheBytes: 64 * 1024 * 1024,
  mode: "auto" as const,
  threads: 1,
  offThreadMinChars: 64 * 1024,
  requestsOffThread: true,
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
  readonly #requestsOffThread: boolean;
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
    this.#pool =
      o.threads > 0
        ? new EncodePool(
            {
              dir: files.dir,
              segmentCacheBytes: o.segmentCacheBytes,
              mode: o.mode,
              requests: o.requestsOffThread,
            },
            o.threads,
          )
        : null;
    this.#offThreadMinChars = o.offThreadMinChars;
    this.#requestsOffThread = o.requestsOffThread;
  }

  async tokenizeCompletion(prompt: string, addSpecialTokens = true): Promise<TokenizeResult> {
    if (typeof prompt !== "string")
      throw new TokenizeError("bad_request", "'prompt' must be a string");
    this.#checkOpen();
    const job: RequestJob = addSpecialTokens
      ? { kind: "completion", prompt }
      : { kind: "completion", prompt, special: false };
    const off = this.#offThread(job, prompt, prompt.length);
    if (off !== null) return off;
    const body = await this.#encodeText(prompt);
    if (!addSpecialTokens) return body;
    return {
      tokenIds: [...this.#encoder.prefix, ...body.tokenIds, ...this.#encoder.suffix],
      cachedSegments: body.cachedSegments,
    };
  }

  /**
   * With `body` (the JSON bytes `request` was read from), a request tokenized on a worker
   * thread crosses as a copy of those bytes, transferred, and is read there: the caller's
   * thread structured-clones no message objects (~5 % of the gateway's event loop).
   */
  async tokenizeChat(request: ChatRequestLike, body?: Uint8Array): Promise<TokenizeResult> {
    this.#checkOpen();
    const chars = chatChars(request);
    const off = this.#offThread(
      body === undefined
        ? { kind: "chat", request }
        : () => ({ kind: "chatBody", body: new Uint8Array(body) }),
      conversationKey(request),
      chars,
      // What the thread reads: the body's bytes (tools, documents, images and all, parsed
      // there), or the text plus the tools and documents the template renders.
      body === undefined ? chars + chatExtraChars(request) : body.byteLength,
    );
    if (off !== null) return off;
    return this.#withSpecial(request, await this.#encodeText(this.renderChat(request)));
  }

  /**
   * vLLM encodes a chat's rendered prompt with the request's `add_special_tokens` (default
   * false): true adds what a completion gets (e.g. Llama 3's BOS, on top of the template's).
   */
  #withSpecial(request: ChatRequestLike, r: TokenizeResult): TokenizeResult {
    if (request.add_special_tokens !== true) return r;
    const { prefix, suffix } = this.#encoder;
    if (prefix.length === 0 && suffix.length === 0) return r;
    return { tokenIds: [...prefix, ...r.tokenIds, ...suffix], cachedSegments: r.cachedSegments };
  }

  /** A completion's ids on this thread, through the segment cache. */
  tokenizeCompletionSync(prompt: string, addSpecialTokens = true): TokenizeResult {
    if (typeof prompt !== "string")
      throw new TokenizeError("bad_request", "'prompt' must be a string");
    const body = this.#encodeTextSync(prompt);
    if (!addSpecialTokens) return body;
    return {
      tokenIds: [...this.#encoder.prefix, ...body.tokenIds, ...this.#encoder.suffix],
      cachedSegments: body.cachedSegments,
    };
  }

  /** A chat's ids on this thread, through the segment cache. */
  tokenizeChatSync(request: ChatRequestLike): TokenizeResult {
    return this.#withSpecial(request, this.#encodeTextSync(this.renderChat(request)));
  }

  /**
   * `tokenizeChatSync`'s ids laid straight into an `Int32Array` (a worker thread's answer,
   * transferred as it is: no array of numbers grown id by id and then copied).
   */
  tokenizeChatIdsSync(request: ChatRequestLike): { ids: Int32Array; cachedSegments: number } {
    const r = this.#chatIdsSync(request);
    const { prefix, suffix } = this.#encoder;
    if (request.add_special_tokens !== true || prefix.length + suffix.length === 0) return r;
    const ids = new Int32Array(prefix.length + r.ids.length + suffix.length);
    ids.set(prefix);
    ids.set(r.ids, prefix.length);
    ids.set(suffix, prefix.length + r.ids.length);
    return { ids, cachedSegments: r.cachedSegments };
  }

  #chatIdsSync(request: ChatRequestLike): { ids: Int32Array; cachedSegments: number } {
    const text = this.renderChat(request);
    if (this.mode === "whole") {
      return { ids: Int32Array.from(this.#encoder.encode(text)), cachedSegments: 0 };
    }
    const c = this.#collect(text);
    this.#store(
      c,
      c.missing.map((t) => this.#encoder.encode(t)),
    );
    let n = 0;
    for (const p of c.pieces) n += p.kind === "token" ? 1 : c.found.get(p.text)!.length;
    const ids = new Int32Array(n);
    let at = 0;
    for (const p of c.pieces) {
      if (p.kind === "token") ids[at++] = p.id;
      else {
        const seg = c.found.get(p.text)!;
        for (let i = 0; i < seg.length; i++) ids[at++] = seg[i]!;
      }
    }
    return { ids, cachedSegments: c.cached };
  }

  /** The whole request on a pool worker, or null (no pool, off, or no worker ready yet). */
  #offThread(
    job: RequestJob | (() => RequestJob),
    key: string,
    chars: number,
    work = chars,
  ): Promise<TokenizeResult> | null {
    if (!this.#requestsOffThread || this.#pool === null) return null;
    // A small request does not wait behind a busy thread (it is encoded here instead); a
    // large one goes to the thread anyway, as it would without whole-request threading.
    const run = this.#pool.tryRun(job, hashKey(key), chars, this.#offThreadMinChars, work);
    if (run === null) return null;
    return run.then((r) => threadResult(r.ids, r.cached));
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

  /** Start the worker threads now (they load in the background) rather than on first use. */
  warmThreads(): void {
    this.#pool?.warm();
  }

  /** The worker pool's state (all zero without threads). */
  poolState(): PoolState {
    return this.#pool?.state() ?? { started: 0, ready: 0, jobs: 0, deaths: 0 };
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

  #encodeTextSync(text: string): TokenizeResult {
    this.#checkOpen();
    if (this.mode === "whole") return { tokenIds: this.#encoder.encode(text), cachedSegments: 0 };
    const c = this.#collect(text);
    return this.#finish(
      c,
      c.missing.map((t) => this.#encoder.encode(t)),
    );
  }

  async #encodeText(text: string): Promise<TokenizeResult> {
    this.#checkOpen();
    if (this.mode === "whole") {
      const off =
        text.length >= this.#offThreadMinChars ? this.#pool?.tryEncode([text]) : undefined;
      const ids = off ? toArray((await off)[0]!) : this.#encoder.encode(text);
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
    return [...this.tokenizeChatSync(request).tokenIds];
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

  /** Cache the newly encoded segments (`encoded[i]` is `c.missing[i]`'s ids). */
  #store(c: Collected, encoded: readonly ArrayLike<number>[]): void {
    c.missing.forEach((t, i) => {
      const ids = encoded[i]!;
      c.found.set(t, ids);
      this.#cache?.set(t, ids);
    });
  }

  /** Cache the newly encoded segments and lay the ids out in order. */
  #finish(c: Collected, encoded: readonly ArrayLike<number>[]): TokenizeResult {
    this.#store(c, encoded);
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

/** The text characters of a chat's messages, about (string contents and text parts). */
function chatChars(request: ChatRequestLike): number {
  let n = 0;
  for (const m of request.messages) {
    const c = (m as { content?: unknown } | null)?.content;
    if (typeof c === "string") n += c.length;
    else if (Array.isArray(c)) {
      for (const p of c) {
        const t = (p as { text?: unknown } | null)?.text;
        if (typeof t === "string") n += t.length;
      }
    }
  }
  return n;
}

/** The tools' and documents' JSON, which the template renders into the prompt (characters). */
function chatExtraChars(request: ChatRequestLike): number {
  let n = 0;
  for (const list of [request.tools, request.documents]) {
    if (!Array.isArray(list) || list.length === 0) continue;
    try {
      n += JSON.stringify(list)?.length ?? 0;
    } catch {
      // Not JSON (a library caller's object): the template reports it, not the estimate.
    }
  }
  return n;
}

/**
 * What names a conversation for the worker's affinity: its first message that is not the
 * system prompt (shared by many conversations), cut short; every turn of a chat starts the
 * same, so its turns meet the worker whose segment cache holds its history.
 */
function conversationKey(request: ChatRequestLike): string {
  const ms = request.messages;
  for (const m of ms) {
    const role = (m as { role?: unknown } | null)?.role;
    if (role === "system" || role === "developer") continue;
    const c = (m as { content?: unknown } | null)?.content;
    if (typeof c === "string") return c.slice(0, 256);
    // Parts: the first text part (not the whole array: images are base64, megabytes).
    if (Array.isArray(c)) {
      for (const p of c) {
        const t = (p as { text?: unknown } | null)?.text;
        if (typeof t === "string") return t.slice(0, 256);
      }
    }
    return "";
  }
  return "";
}

/** A worker thread's answer: the typed ids, and an array made from them only if read. */
function threadResult(ids: Int32Array, cached: number): TokenizeResult {
  let array: number[] | null = null;
  return {
    get tokenIds() {
      array ??= toArray(ids);
      return array;
    },
    ids,
    cachedSegments: cached,
    onThread: true,
  };
}

/**
 * The ids as a plain array. A counted loop: `Array.from` on a typed array goes through the
 * iterator protocol and was 7 % of the gateway's event loop (8.8k ids per chat).
 */
function toArray(ids: Int32Array): number[] {
  const out = new Array<number>(ids.length);
  for (let i = 0; i < ids.length; i++) out[i] = ids[i]!;
  return out;
}

/** FNV-1a over the key's UTF-16 units: cheap, stable, spreads the keys. */
function hashKey(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return h >>> 0;
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
