/**
 * Keeps applying KV events from starving routing. Batches arrive in bursts (the decode
 * thread posts groups of up to 64 batches; a socket with a backlog resolves receives back
 * to back), and Node runs a burst of thread messages or resolved receives without polling
 * for I/O in between: a flood would hold HTTP requests, scrapes and `/metrics` for
 * seconds. The slicer lets apply work run for at most `sliceMs` (1 ms) per event-loop turn; work
 * arriving after that waits, in arrival order, for a later turn (`setImmediate`, which
 * runs after the turn's I/O). One slicer is shared by every subscriber of the process, so
 * the budget is per turn, not per stream.
 *
 * A task can be resumable (`runSteps`): while its step returns true it has more to do
 * and is called again (its next unit of work) while the slice has room, else on a later
 * turn, keeping its place ahead of later tasks. The subscriber queues one such task per decode-thread
 * group (a message per call) instead of a closure per message. A unit is never split:
 * a single huge batch still runs whole (groups are at most ~1 MB).
 */

import { performance } from "node:perf_hooks";

export class ApplySlicer {
  /** Apply time per event-loop turn (ms); the benchmark varies it. */
  sliceMs: number;
  readonly #now: () => number;
  readonly #queue: (() => unknown)[] = [];
  /** Per queued task: a resumable step (`runSteps`), called until it returns false. */
  readonly #steps: boolean[] = [];
  #head = 0;
  #inSlice = false;
  #sliceStart = 0;

  constructor(sliceMs = 1, now: () => number = () => performance.now()) {
    this.sliceMs = sliceMs;
    this.#now = now;
  }

  /** Tasks waiting for a later turn. */
  get waiting(): number {
    return this.#queue.length - this.#head;
  }

  /** Runs `task` now if this turn's slice has room and nothing waits, else queues it. */
  run(task: () => void): void {
    if (this.waiting === 0 && this.#hasRoom()) {
      task();
      return;
    }
    this.#push(task, false);
  }

  /**
   * A resumable task: `step` does one unit of work and returns true while there is more.
   * Steps run now while this turn's slice has room (and nothing waits); the rest waits,
   * in order with other tasks, for later turns.
   */
  runSteps(step: () => boolean): void {
    if (this.waiting === 0 && this.#hasRoom()) {
      while (step()) {
        if (!this.#hasRoom()) {
          this.#push(step, true);
          return;
        }
      }
      return;
    }
    this.#push(step, true);
  }

  #push(task: () => unknown, resumable: boolean): void {
    this.#queue.push(task);
    this.#steps.push(resumable);
    this.#open();
  }

  /** True when this turn's slice is spent: a loop should `await yieldTurn()`. */
  spent(): boolean {
    return this.waiting > 0 || !this.#hasRoom();
  }

  /** Resolves on a later turn, in order with queued tasks. */
  yieldTurn(): Promise<void> {
    return new Promise((resolve) => this.#push(resolve, false));
  }

  /** Starts this turn's slice if none is open; true while it has time left. */
  #hasRoom(): boolean {
    const now = this.#now();
    if (!this.#inSlice) {
      this.#open();
      this.#sliceStart = now;
      return true;
    }
    return now - this.#sliceStart < this.sliceMs;
  }

  #open(): void {
    if (this.#inSlice) return;
    this.#inSlice = true;
    this.#sliceStart = this.#now();
    setImmediate(this.#nextTurn);
  }

  readonly #nextTurn = (): void => {
    this.#inSlice = false;
    const q = this.#queue;
    while (this.#head < q.length && this.#hasRoom()) {
      const task = q[this.#head]!;
      let more = false;
      try {
        more = task() === true && this.#steps[this.#head]!;
      } catch (err) {
        // Tasks handle their own errors; one that escapes must not stop the others (the
        // task that threw is dropped).
        process.nextTick(() => {
          throw err;
        });
      }
      if (!more) q[this.#head++] = noop;
    }
    if (this.#head === q.length) {
      q.length = 0;
      this.#steps.length = 0;
      this.#head = 0;
    } else if (this.#head > 1024) {
      q.splice(0, this.#head);
      this.#steps.splice(0, this.#head);
      this.#head = 0;
    }
  };
}

function noop(): void {}

/** The process's slicer, shared by all subscribers. */
export const applySlicer = new ApplySlicer();
