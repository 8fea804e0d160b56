/**
 * A counting semaphore shared by the streams of a `SubscriberPool`: at most `limit`
 * replay requests run at once across the fleet, the others wait in arrival order. An
 * engine's replay ROUTER drops replies past its send high-water mark when many are read
 * at once (vLLM's does), so a router restart facing many engines must not ask all of
 * them together. A waiter can give up (its subscriber is closing) through its signal.
 */

export class ReplaySlots {
  readonly #limit: number;
  #busy = 0;
  readonly #waiters: (() => void)[] = [];

  constructor(limit: number) {
    if (!Number.isInteger(limit) || limit < 1) {
      throw new RangeError(`replay slots must be an integer ≥ 1, got ${limit}`);
    }
    this.#limit = limit;
  }

  /** Requests running now. */
  get busy(): number {
    return this.#busy;
  }

  /**
   * Wait for a slot; resolves to a release function (call it exactly once), or to null
   * when `signal` aborts first.
   */
  acquire(signal?: AbortSignal): Promise<(() => void) | null> {
    if (signal?.aborted) return Promise.resolve(null);
    if (this.#busy < this.#limit) {
      this.#busy++;
      return Promise.resolve(this.#releaser());
    }
    return new Promise((resolve) => {
      const grant = () => {
        signal?.removeEventListener("abort", abort);
        this.#busy++;
        resolve(this.#releaser());
      };
      const abort = () => {
        const i = this.#waiters.indexOf(grant);
        if (i >= 0) this.#waiters.splice(i, 1);
        resolve(null);
      };
      this.#waiters.push(grant);
      signal?.addEventListener("abort", abort, { once: true });
    });
  }

  #releaser(): () => void {
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.#busy--;
      this.#waiters.shift()?.();
    };
  }
}

/**
 * Wait `delayMs` (the back-off), then for a slot of `slots` (when given), then run
 * `task` holding the slot. Null, without running `task`, when `signal` aborts first.
 */
export async function withReplaySlot<T>(
  slots: ReplaySlots | undefined,
  delayMs: number,
  signal: AbortSignal,
  task: () => Promise<T>,
): Promise<T | null> {
  if (delayMs > 0) {
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener("abort", done);
        resolve();
      };
      const timer = setTimeout(done, delayMs);
      signal.addEventListener("abort", done, { once: true });
    });
  }
  const release = slots === undefined ? () => {} : await slots.acquire(signal);
  if (release === null || signal.aborted) {
    release?.();
    return null;
  }
  try {
    return await task();
  } finally {
    release();
  }
}
