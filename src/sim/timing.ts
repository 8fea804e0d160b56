/**
 * Time for the simulated engine: an injected clock with timers (real or virtual) and the
 * latency model shared by the simulated worker (`engine.ts`) and the trace replay
 * (`src/replay/`), documented in docs/simulator.md and docs/replay.md:
 *
 * - prefill is the scarce resource: an engine computes one prompt at a time, FIFO, at
 *   `prefillTokensPerSec` uncached tokens per second plus `prefillOverheadMs` per
 *   request (scheduling and the step that emits the first token). That is the
 *   throughput of vLLM's chunked prefill, where prompts share steps but not FLOPs;
 * - decoding runs beside prefill (its FLOPs are small): each further output token takes
 *   `decodeMsPerToken`, whatever the batch size;
 * - a request holds one of `maxNumSeqs` running slots and its KV blocks from the start
 *   of its prefill until its last token; requests that cannot start wait in FIFO order.
 */

/** Opaque timer handle. */
export type TimerId = unknown;

/** Milliseconds clock plus one-shot timers. */
export interface SimClock {
  now(): number;
  setTimer(delayMs: number, fn: () => void): TimerId;
  clearTimer(id: TimerId): void;
}

/** Wall-clock time and Node timers. */
export const realClock: SimClock = {
  now: () => performance.timeOrigin + performance.now(),
  setTimer: (delayMs, fn) => setTimeout(fn, delayMs),
  clearTimer: (id) => clearTimeout(id as ReturnType<typeof setTimeout>),
};

/**
 * A virtual clock for the engine's tests: time moves only when `advance`/`runAll` say so.
 * (Trace replay does not use it: it runs its own fleet model on `replay/event-queue.ts`.)
 */
export class VirtualClock implements SimClock {
  #now: number;
  #seq = 0;
  readonly #timers = new Map<number, { at: number; fn: () => void }>();

  constructor(startMs = 0) {
    this.#now = startMs;
  }

  now(): number {
    return this.#now;
  }

  setTimer(delayMs: number, fn: () => void): TimerId {
    const id = ++this.#seq;
    this.#timers.set(id, { at: this.#now + Math.max(0, delayMs), fn });
    return id;
  }

  clearTimer(id: TimerId): void {
    this.#timers.delete(id as number);
  }

  get pending(): number {
    return this.#timers.size;
  }

  /** Fire due timers in time order (ties in creation order) up to `now + ms`. */
  advance(ms: number): void {
    const until = this.#now + ms;
    for (;;) {
      let best: number | null = null;
      let bestAt = Number.POSITIVE_INFINITY;
      for (const [id, t] of this.#timers) {
        if (t.at < bestAt) {
          best = id;
          bestAt = t.at;
        }
      }
      if (best === null || bestAt > until) break;
      const t = this.#timers.get(best)!;
      this.#timers.delete(best);
      this.#now = t.at;
      t.fn();
    }
    this.#now = until;
  }

  /** Fire timers until none is left (bounded, so a bug cannot spin forever). */
  runAll(maxTimers = 1_000_000): void {
    for (let i = 0; i < maxTimers && this.#timers.size > 0; i++) {
      let bestAt = Number.POSITIVE_INFINITY;
      for (const t of this.#timers.values()) bestAt = Math.min(bestAt, t.at);
      this.advance(bestAt - this.#now);
    }
  }
}

/** The latency parameters of one engine (simulated worker or replayed worker). */
export interface TimingModel {
  /** Uncached prompt tokens one engine computes per second. */
  readonly prefillTokensPerSec: number;
  /** Fixed time per prefill, ms (includes the step producing the first token). */
  readonly prefillOverheadMs: number;
  /** Time per output token after the first, ms. */
  readonly decodeMsPerToken: number;
  /** Most requests running (prefilling or decoding) at once on an engine. */
  readonly maxNumSeqs: number;
}

/** Prefill duration (ms) of a prompt with `uncachedTokens` to compute. */
export function prefillMs(
  t: Pick<TimingModel, "prefillTokensPerSec" | "prefillOverheadMs">,
  uncachedTokens: number,
): number {
  return t.prefillOverheadMs + (uncachedTokens * 1000) / t.prefillTokensPerSec;
}

/** Decode duration (ms) of `outputTokens` tokens after the first one. */
export function decodeMs(t: Pick<TimingModel, "decodeMsPerToken">, outputTokens: number): number {
  return Math.max(0, outputTokens - 1) * t.decodeMsPerToken;
}

/** Check a timing model; returns the name of the first bad field, or null. */
export function invalidTimingField(t: TimingModel): string | null {
  if (!(t.prefillTokensPerSec > 0) || !Number.isFinite(t.prefillTokensPerSec))
    return "prefillTokensPerSec";
  if (!(t.prefillOverheadMs >= 0) || !Number.isFinite(t.prefillOverheadMs))
    return "prefillOverheadMs";
  if (!(t.decodeMsPerToken >= 0) || !Number.isFinite(t.decodeMsPerToken)) return "decodeMsPerToken";
  if (!Number.isSafeInteger(t.maxNumSeqs) || t.maxNumSeqs < 1) return "maxNumSeqs";
  return null;
}
