/**
 * Admission under overload: when every candidate worker is past the busy threshold, a new
 * request waits in a bounded FIFO queue instead of piling onto saturated engines, and is
 * admitted when capacity frees (a request finishes or passes prefill, or the next load
 * scrape shows room; the queue also re-checks every `pollMs`). Past the bound or its
 * deadline it is refused (the gateway answers 429 with `Retry-After`).
 *
 * FIFO is strict per key (the model, or a LoRA adapter: its own candidates decide whether
 * it is busy): while anyone with the same key waits, a newcomer queues behind even if
 * capacity freed; a request for another key, whose candidates are not all busy, does not
 * wait — unless a waiter of another key could go now (keys share workers: the freed one
 * is the waiter's). The queue admits one request per check, so each admitted request is
 * routed (and counted in flight) before the next busy check.
 */

export type AdmitOutcome =
  | { readonly ok: true; readonly waitedMs: number }
  | {
      readonly ok: false;
      readonly reason: "full" | "timeout" | "aborted" | "closed";
      readonly waitedMs: number;
    };

export interface AdmissionOptions {
  readonly maxSize: number;
  readonly timeoutMs: number;
  /** Re-check interval while requests wait (load scrapes change busy-ness silently). */
  readonly pollMs?: number;
  readonly nowMs?: () => number;
}

interface Waiter {
  readonly key: string | null;
  readonly busy: () => boolean;
  readonly enqueuedMs: number;
  settle(outcome: AdmitOutcome): void;
}

export class AdmissionQueue {
  readonly #opts: Required<AdmissionOptions>;
  #queue: Waiter[] = [];
  #poll: NodeJS.Timeout | null = null;
  #scheduled = false;
  #closed = false;
  /** Waiters per key. */
  readonly #perKey = new Map<string | null, number>();

  constructor(opts: AdmissionOptions) {
    this.#opts = { pollMs: 25, nowMs: Date.now, ...opts };
  }

  get depth(): number {
    return this.#queue.length;
  }

  /** Whether anyone with `key` waits. */
  waiting(key: string | null): boolean {
    return this.#perKey.has(key);
  }

  /**
   * Whether a newcomer with `key` may skip the queue (its own candidates not all busy):
   * nobody with its key waits, and no waiter of another key could go now. Keys share
   * workers (an adapter's are some of its base model's; a worker declared without a model
   * serves every model): a freed worker a waiter can use is the waiter's, until the next
   * check admits it.
   */
  mayPass(key: string | null): boolean {
    return !this.#perKey.has(key) && !this.#headReady();
  }

  /**
   * Resolve when the request may proceed (`busy()` false and nobody with the same `key`
   * ahead), or is refused.
   */
  admit(
    busy: () => boolean,
    signal: AbortSignal,
    key: string | null = null,
  ): Promise<AdmitOutcome> {
    const now = this.#opts.nowMs;
    const t0 = now();
    if (this.#closed) return Promise.resolve({ ok: false, reason: "closed", waitedMs: 0 });
    if (this.mayPass(key) && !busy()) return Promise.resolve({ ok: true, waitedMs: 0 });
    if (signal.aborted) return Promise.resolve({ ok: false, reason: "aborted", waitedMs: 0 });
    if (this.#queue.length >= this.#opts.maxSize) {
      return Promise.resolve({ ok: false, reason: "full", waitedMs: 0 });
    }
    return new Promise((resolve) => {
      let settled = false;
      const waiter: Waiter = {
        key,
        busy,
        enqueuedMs: t0,
        settle: (o) => {
          if (settled) return;
          settled = true;
          clearTimeout(deadline);
          signal.removeEventListener("abort", onAbort);
          const i = this.#queue.indexOf(waiter);
          if (i >= 0) {
            this.#queue.splice(i, 1);
            const n = this.#perKey.get(key)!;
            if (n > 1) this.#perKey.set(key, n - 1);
            else this.#perKey.delete(key);
          }
          if (this.#queue.length === 0) this.#stopPoll();
          resolve(o);
        },
      };
      const deadline = setTimeout(
        () => waiter.settle({ ok: false, reason: "timeout", waitedMs: now() - t0 }),
        this.#opts.timeoutMs,
      );
      const onAbort = () => waiter.settle({ ok: false, reason: "aborted", waitedMs: now() - t0 });
      signal.addEventListener("abort", onAbort, { once: true });
      this.#queue.push(waiter);
      this.#perKey.set(key, (this.#perKey.get(key) ?? 0) + 1);
      this.#startPoll();
      // A waiter ahead may go now (the newcomer queued behind it): check now, not at the poll.
      this.notify();
    });
  }

  /** Capacity may have freed: admit the first key's head that is no longer busy. */
  notify(): void {
    if (this.#queue.length === 0 || this.#scheduled) return;
    this.#scheduled = true;
    // After the current step, so a just-admitted request is routed before the next check.
    setImmediate(() => {
      this.#scheduled = false;
      this.#pump();
    });
  }

  #pump(): void {
    const w = this.#firstReady();
    if (w === undefined) return;
    w.settle({ ok: true, waitedMs: this.#opts.nowMs() - w.enqueuedMs });
    this.notify();
  }

  /** Whether the head of some key's waiters is no longer busy (the pump would admit it). */
  #headReady(): boolean {
    return this.#firstReady() !== undefined;
  }

  /**
   * The first waiter, in queue order, that heads its key's waiters and is no longer busy
   * (one key: the queue's head, if free).
   */
  #firstReady(): Waiter | undefined {
    if (this.#queue.length === 0) return undefined;
    const seen = new Set<string | null>();
    for (const w of this.#queue) {
      if (seen.has(w.key)) continue;
      seen.add(w.key);
      if (!w.busy()) return w;
      if (seen.size === this.#perKey.size) return undefined;
    }
    return undefined;
  }

  #startPoll(): void {
    if (this.#poll !== null) return;
    this.#poll = setInterval(() => this.#pump(), this.#opts.pollMs);
    this.#poll.unref();
  }

  #stopPoll(): void {
    if (this.#poll !== null) clearInterval(this.#poll);
    this.#poll = null;
  }

  /** Refuse everyone waiting, and whoever would wait from now on (shutdown). */
  close(): void {
    this.#closed = true;
    const now = this.#opts.nowMs();
    for (const w of [...this.#queue]) {
      w.settle({ ok: false, reason: "closed", waitedMs: now - w.enqueuedMs });
    }
    this.#stopPoll();
  }
}
