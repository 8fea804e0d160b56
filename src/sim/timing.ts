/**
 * Time for the simulated engine: an injected clock with timers (real or virtual) and the
 * latency model (see docs/simulator.md). Prefill costs time per uncached prompt token,
 * decode a fixed time per output token; sequences progress independently, bounded by the
 * engine's sequence limit and KV capacity.
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

/** A virtual clock for tests and replay: time moves only when `advance`/`runAll` say so. */
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

export interface TimingOptions {
  /** Prefill throughput, prompt tokens per second (uncached tokens only). */
  readonly prefillTokensPerSec: number;
  /** Time per generated token after the first. */
  readonly decodeMsPerToken: number;
}

/** Milliseconds to prefill `uncachedTokens` tokens. */
export function prefillMs(t: TimingOptions, uncachedTokens: number): number {
  return (uncachedTokens / t.prefillTokensPerSec) * 1000;
}
