/**
 * The simulated engine's scheduler: a FIFO waiting queue, a limit on running sequences,
 * admission through the paged KV cache (a request waits while blocks are short), one
 * prefill at a time (FIFO: prefill is compute-bound, so concurrent prompts share the GPU),
 * decode beside it on the injected clock, and vLLM-style preemption (the latest admitted
 * sequence gives its blocks back and waits again) when a decode step finds no free block.
 * The timing rules are the trace replay's (`timing.ts`), so both tell the same story.
 *
 * Cache events raised while handling one engine action are flushed together as one batch,
 * as vLLM publishes one batch per engine step.
 */

import { type CacheEvent, type KvCacheOptions, type KvSequence, PagedKvCache } from "./kv-cache.js";
import { prefillMs, type SimClock, type TimerId, type TimingModel } from "./timing.js";

/** `maxNumSeqs`: most sequences running (prefilling or decoding) at once (vLLM's `max_num_seqs`). */
export interface EngineOptions extends TimingModel {
  /** Longest prompt + output, in tokens; longer requests are refused at submission. */
  readonly maxModelLen: number;
}

export interface SimRequest {
  readonly id: string;
  readonly promptTokens: readonly number[];
  readonly maxTokens: number;
  readonly loraName: string | null;
}

export type FinishReason = "length" | "abort";

export interface RequestOutcome {
  readonly reason: FinishReason;
  readonly promptTokens: number;
  /** Prompt tokens found in the prefix cache at first admission. */
  readonly cachedTokens: number;
  readonly completionTokens: number;
}

/** Callbacks of one request; called synchronously from engine actions. */
export interface RequestListener {
  onToken(tokenId: number, index: number): void;
  onFinish(outcome: RequestOutcome): void;
}

export class RequestTooLongError extends Error {
  override readonly name = "RequestTooLongError";
}

interface Running {
  readonly req: SimRequest;
  readonly seq: KvSequence;
  readonly listener: RequestListener;
  readonly submittedAt: number;
  /** Prompt hit tokens at the first admission (-1 before it). */
  cachedTokens: number;
  generated: number;
  timer: TimerId | null;
}

export interface EngineCounters {
  readonly running: number;
  readonly waiting: number;
  readonly preemptions: number;
  readonly promptTokens: number;
  readonly generationTokens: number;
  readonly finished: number;
  /** Requests stopped before their end (the client went away). */
  readonly aborted: number;
}

export class SimEngine {
  readonly #opts: EngineOptions;
  readonly #cache: PagedKvCache;
  readonly #clock: SimClock;
  readonly #nextToken: (tokens: readonly number[]) => number;
  readonly #onBatch: (events: CacheEvent[]) => void;
  #pending: CacheEvent[] = [];
  readonly #waiting: Running[] = [];
  readonly #running: Running[] = [];
  readonly #byId = new Map<string, Running>();
  /** The request whose prefill is being computed (the single prefill server), or null. */
  #prefilling: Running | null = null;
  #preemptions = 0;
  #promptTokens = 0;
  #generationTokens = 0;
  #finished = 0;
  #aborted = 0;

  /**
   * @param nextToken the model: the token following a sequence
   * @param onBatch receives each non-empty batch of cache events, in order
   */
  constructor(
    opts: EngineOptions,
    cacheOptions: KvCacheOptions,
    clock: SimClock,
    nextToken: (tokens: readonly number[]) => number,
    onBatch: (events: CacheEvent[]) => void,
  ) {
    this.#opts = opts;
    this.#cache = new PagedKvCache(cacheOptions, (event) => this.#pending.push(event));
    this.#clock = clock;
    this.#nextToken = nextToken;
    this.#onBatch = onBatch;
  }

  get cache(): PagedKvCache {
    return this.#cache;
  }

  counters(): EngineCounters {
    return {
      running: this.#running.length,
      waiting: this.#waiting.length,
      preemptions: this.#preemptions,
      promptTokens: this.#promptTokens,
      generationTokens: this.#generationTokens,
      finished: this.#finished,
      aborted: this.#aborted,
    };
  }

  /** Queue a request. Throws `RequestTooLongError` if it could never fit this engine. */
  submit(req: SimRequest, listener: RequestListener): void {
    const total = req.promptTokens.length + req.maxTokens;
    if (total > this.#opts.maxModelLen) {
      throw new RequestTooLongError(
        `This model's maximum context length is ${this.#opts.maxModelLen} tokens. However, you requested ${total} tokens (${req.promptTokens.length} in the messages, ${req.maxTokens} in the completion). Please reduce the length of the messages or completion.`,
      );
    }
    if (this.#byId.has(req.id)) throw new Error(`duplicate request id ${req.id}`);
    const r: Running = {
      req,
      seq: this.#cache.sequence(req.promptTokens, req.loraName),
      listener,
      submittedAt: this.#clock.now(),
      cachedTokens: -1,
      generated: 0,
      timer: null,
    };
    this.#byId.set(req.id, r);
    this.#waiting.push(r);
    this.#act(() => this.#admit());
  }

  /** Stop a request (client went away); its blocks are freed. No-op when unknown. */
  abort(id: string): void {
    const r = this.#byId.get(id);
    if (r === undefined) return;
    this.#act(() => {
      const w = this.#waiting.indexOf(r);
      if (w >= 0) this.#waiting.splice(w, 1);
      this.#finish(r, "abort");
      this.#admit();
    });
  }

  /** Reset the prefix cache; false when blocks are still in use (as vLLM). */
  resetPrefixCache(): boolean {
    let ok = false;
    this.#act(() => {
      ok = this.#cache.resetPrefixCache();
    });
    return ok;
  }

  /** Stop every request and timer (shutdown). */
  close(): void {
    for (const r of [...this.#byId.values()]) this.abort(r.req.id);
  }

  #act(fn: () => void): void {
    fn();
    if (this.#pending.length > 0) {
      const batch = this.#pending;
      this.#pending = [];
      this.#onBatch(batch);
    }
  }

  /**
   * Start the waiting head's prefill if the prefill server is free, a running slot is free
   * and its blocks fit (FIFO: nobody overtakes a head short of blocks). A request holds
   * its slot and blocks from here until its last token.
   */
  #admit(): void {
    while (
      this.#prefilling === null &&
      this.#waiting.length > 0 &&
      this.#running.length < this.#opts.maxNumSeqs
    ) {
      const r = this.#waiting[0]!;
      const got = this.#cache.admit(r.seq);
      if (got === null) return; // FIFO: the head waits for blocks, and so do the others
      this.#waiting.shift();
      this.#running.push(r);
      if (r.cachedTokens < 0) {
        r.cachedTokens = got.hitTokens;
        this.#promptTokens += r.req.promptTokens.length;
      }
      const ms = prefillMs(this.#opts, r.seq.tokens.length - got.hitTokens);
      this.#prefilling = r;
      r.timer = this.#clock.setTimer(ms, () => this.#act(() => this.#prefilled(r)));
    }
  }

  /** `r`'s prefill finished: it emits its first token; `#sample` starts the next prefill. */
  #prefilled(r: Running): void {
    this.#prefilling = null;
    this.#sample(r);
  }

  /**
   * A forward pass of `r` finished: emit its next token, then schedule the next step.
   * As vLLM's scheduler, a step that preempted nobody then tries to admit waiting requests.
   */
  #sample(r: Running): void {
    r.timer = null;
    const token = this.#nextToken(r.seq.tokens);
    r.seq.tokens.push(token);
    const index = r.generated++;
    this.#generationTokens++;
    r.listener.onToken(token, index);
    if (r.generated >= r.req.maxTokens) {
      this.#finish(r, "length");
      this.#admit();
      return;
    }
    if (this.#decodeStep(r)) this.#admit();
  }

  /** Make room for `r`'s next token (preempting if short) and time it; false if anyone was preempted. */
  #decodeStep(r: Running): boolean {
    let preempted = false;
    while (!this.#cache.grow(r.seq)) {
      const victim = this.#running.at(-1)!;
      this.#preempt(victim);
      preempted = true;
      if (victim === r) {
        if (this.#running.length === 0) this.#admit();
        return false;
      }
    }
    r.timer = this.#clock.setTimer(this.#opts.decodeMsPerToken, () =>
      this.#act(() => this.#sample(r)),
    );
    return !preempted;
  }

  #preempt(r: Running): void {
    if (r.timer !== null) this.#clock.clearTimer(r.timer);
    r.timer = null;
    if (this.#prefilling === r) this.#prefilling = null;
    this.#cache.free(r.seq);
    this.#running.splice(this.#running.indexOf(r), 1);
    this.#waiting.unshift(r);
    this.#preemptions++;
  }

  #finish(r: Running, reason: FinishReason): void {
    if (r.timer !== null) this.#clock.clearTimer(r.timer);
    r.timer = null;
    if (this.#prefilling === r) this.#prefilling = null;
    const i = this.#running.indexOf(r);
    if (i >= 0) {
      this.#running.splice(i, 1);
      this.#cache.free(r.seq);
    }
    this.#byId.delete(r.req.id);
    this.#finished++;
    if (reason === "abort") this.#aborted++;
    r.listener.onFinish({
      reason,
      promptTokens: r.req.promptTokens.length,
      cachedTokens: Math.max(0, r.cachedTokens),
      completionTokens: r.generated,
    });
  }
}
