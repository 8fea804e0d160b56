/**
 * One circuit breaker per worker (per engine, all its data-parallel ranks share the HTTP
 * endpoint), built on cockatiel's `CircuitBreakerPolicy` with a `ConsecutiveBreaker`:
 * `failures` consecutive failures (connect error, timeout, 5xx — not 4xx, not 429) open
 * the circuit; the scheduler then excludes the worker; once `halfOpenAfterMs` has passed
 * the next request routed there is the trial (cockatiel moves to half-open while it runs,
 * and no other request is routed there); its success closes the circuit, its failure
 * opens it again for another `halfOpenAfterMs`.
 *
 * cockatiel keeps the state machine; this adds what routing needs from it: "may a new
 * request go there now?" (cockatiel only answers that by being called), the open time
 * and the counts shown in `/v1/workers` and metrics.
 */

import {
  type CircuitBreakerPolicy,
  CircuitState,
  ConsecutiveBreaker,
  circuitBreaker,
  handleWhen,
} from "cockatiel";

export type CircuitName = "closed" | "open" | "half_open";

/** An error that counts against the worker's circuit. */
export interface BreakerFailure {
  readonly countsForBreaker: boolean;
}

/** An attempt that ended without telling anything about the worker (the client left). */
export interface InconclusiveAttempt {
  readonly inconclusive: true;
}

const counts = (err: unknown): boolean =>
  typeof err === "object" &&
  err !== null &&
  (err as Partial<BreakerFailure>).countsForBreaker === true;

const inconclusive = (err: unknown): boolean =>
  typeof err === "object" &&
  err !== null &&
  (err as Partial<InconclusiveAttempt>).inconclusive === true;

export interface BreakerOptions {
  readonly failures: number;
  readonly halfOpenAfterMs: number;
  /** Called on every transition (logging, metrics). */
  readonly onChange?: (workerId: string, state: CircuitName) => void;
}

interface Entry {
  readonly policy: CircuitBreakerPolicy;
  openedAtMs: number | null;
  consecutiveFailures: number;
  opens: number;
  readonly dispose: () => void;
}

/** The JSON of one worker's circuit in `/v1/workers`. */
export interface CircuitView {
  readonly state: CircuitName;
  readonly consecutive_failures: number;
  readonly opened_at_ms: number | null;
  readonly opens: number;
}

const NAMES: Record<CircuitState, CircuitName> = {
  [CircuitState.Closed]: "closed",
  [CircuitState.Open]: "open",
  [CircuitState.HalfOpen]: "half_open",
  [CircuitState.Isolated]: "open",
};

export class WorkerBreakers {
  readonly #opts: BreakerOptions;
  readonly #byId = new Map<string, Entry>();
  /** Inconclusive errors (client gone) that ended a trial request. */
  readonly #inconclusiveTrials = new WeakSet<object>();
  /**
   * Failures of requests sent while the circuit was closed that end after it opened:
   * already accounted for (the circuit is open), and during a trial it is the trial's
   * outcome that decides, not theirs.
   */
  readonly #stale = new WeakSet<object>();

  constructor(opts: BreakerOptions) {
    this.#opts = opts;
  }

  #entry(workerId: string): Entry {
    let e = this.#byId.get(workerId);
    if (e !== undefined) return e;
    // An inconclusive trial (the client left) must not close the circuit, which cockatiel
    // does for any error it does not handle: the trial's own (marked in `execute`) counts
    // as a failure. Another request's, ending while a trial runs, counts for nothing.
    const breaker = new ConsecutiveBreaker(this.#opts.failures);
    const policy: CircuitBreakerPolicy = circuitBreaker(
      handleWhen(
        (err) =>
          (counts(err) && !this.#stale.has(err as object)) ||
          this.#inconclusiveTrials.has(err as object),
      ),
      { halfOpenAfter: this.#opts.halfOpenAfterMs, breaker },
    );
    const entry: Entry = {
      policy,
      openedAtMs: null,
      consecutiveFailures: 0,
      opens: 0,
      dispose: () => {
        for (const d of subs) d.dispose();
      },
    };
    const subs = [
      policy.onBreak(() => {
        // cockatiel measures half-open time with Date.now(); so does this.
        entry.openedAtMs = Date.now();
        entry.opens++;
      }),
      // cockatiel closes a circuit whose trial ended in an error it does not handle (a 429)
      // without resetting the count: the next single failure would open it again.
      policy.onReset(() => {
        breaker.success();
        entry.consecutiveFailures = 0;
      }),
      policy.onStateChange((s) => this.#opts.onChange?.(workerId, NAMES[s])),
    ];
    this.#byId.set(workerId, entry);
    e = entry;
    return e;
  }

  /**
   * May a new request be routed to `workerId` now? Closed: yes. Open: only once
   * `halfOpenAfterMs` has passed (that request will be the trial). Half-open: no, a trial
   * is running.
   */
  allows(workerId: string): boolean {
    const e = this.#byId.get(workerId);
    if (e === undefined) return true;
    switch (e.policy.state) {
      case CircuitState.Closed:
        return true;
      case CircuitState.HalfOpen:
      case CircuitState.Isolated:
        return false;
      case CircuitState.Open:
        return Date.now() - (e.openedAtMs ?? 0) >= this.#opts.halfOpenAfterMs;
    }
  }

  state(workerId: string): CircuitName {
    const e = this.#byId.get(workerId);
    return e === undefined ? "closed" : NAMES[e.policy.state];
  }

  /**
   * Run one attempt through the worker's breaker. Call it in the same synchronous step as
   * the routing decision, so a trial request moves the circuit to half-open before any
   * other request can be routed there.
   */
  async execute<T>(workerId: string, fn: () => Promise<T>): Promise<T> {
    const e = this.#entry(workerId);
    // cockatiel calls the trial's `fn` while the circuit still reads open (it half-opens
    // right after); any other call runs closed.
    const run = async (): Promise<T> => {
      const trial = e.policy.state === CircuitState.Open;
      try {
        return await fn();
      } catch (err) {
        if (trial) {
          if (inconclusive(err)) this.#inconclusiveTrials.add(err as object);
        } else if (e.policy.state !== CircuitState.Closed && typeof err === "object" && err) {
          this.#stale.add(err);
        }
        throw err;
      }
    };
    try {
      const v = await e.policy.execute(run);
      e.consecutiveFailures = 0;
      return v;
    } catch (err) {
      if (counts(err) && !this.#stale.has(err as object)) e.consecutiveFailures++;
      throw err;
    }
  }

  view(workerId: string): CircuitView {
    const e = this.#byId.get(workerId);
    return {
      state: this.state(workerId),
      consecutive_failures: e?.consecutiveFailures ?? 0,
      opened_at_ms: e === undefined || e.policy.state === CircuitState.Closed ? null : e.openedAtMs,
      opens: e?.opens ?? 0,
    };
  }

  /** Every worker with a breaker, for metrics. */
  *entries(): Generator<readonly [string, CircuitView]> {
    for (const id of this.#byId.keys()) yield [id, this.view(id)];
  }

  /** Forget a removed worker. */
  remove(workerId: string): void {
    this.#byId.get(workerId)?.dispose();
    this.#byId.delete(workerId);
  }
}
