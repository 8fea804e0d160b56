/**
 * The discrete-event core of the replay: a clock that jumps from one scheduled action
 * to the next. Actions scheduled for the same virtual time run in the order they were
 * scheduled (a sequence number breaks ties), so a run is fully deterministic.
 */

interface Entry {
  readonly at: number;
  readonly seq: number;
  readonly action: () => void;
}

function before(a: Entry, b: Entry): boolean {
  return a.at < b.at || (a.at === b.at && a.seq < b.seq);
}

/** A virtual clock (ms) and a min-heap of pending actions. */
export class EventQueue {
  #heap: Entry[] = [];
  #seq = 0;
  #now = 0;
  #processed = 0;

  /** Current virtual time, ms. */
  get now(): number {
    return this.#now;
  }

  /** Actions run so far. */
  get processed(): number {
    return this.#processed;
  }

  get pending(): number {
    return this.#heap.length;
  }

  /** Run `action` at virtual time `at` (never before now: the past is clamped to now). */
  schedule(at: number, action: () => void): void {
    if (Number.isNaN(at)) throw new RangeError("cannot schedule at NaN");
    const entry: Entry = { at: Math.max(at, this.#now), seq: this.#seq++, action };
    const h = this.#heap;
    h.push(entry);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!before(entry, h[p]!)) break;
      h[i] = h[p]!;
      i = p;
    }
    h[i] = entry;
  }

  /** Run `action` `delay` ms from now. */
  after(delay: number, action: () => void): void {
    this.schedule(this.#now + delay, action);
  }

  #pop(): Entry | undefined {
    const h = this.#heap;
    const top = h[0];
    const last = h.pop();
    if (top === undefined || last === undefined || h.length === 0) return top;
    let i = 0;
    const n = h.length;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      const c = r < n && before(h[r]!, h[l]!) ? r : l;
      if (!before(h[c]!, last)) break;
      h[i] = h[c]!;
      i = c;
    }
    h[i] = last;
    return top;
  }

  /** Run actions in time order until none is left (actions may schedule more). */
  run(): void {
    for (;;) {
      const e = this.#pop();
      if (e === undefined) return;
      this.#now = e.at;
      this.#processed++;
      e.action();
    }
  }
}
