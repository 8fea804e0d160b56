/**
 * A first-in first-out queue: an array with a moving head, so draining a long backlog
 * is O(n) rather than O(n²) with `Array.prototype.shift()`. The one copy for the
 * subscriber's pending batches (`ingest/sequencer.ts`) and the in-flight tracker's
 * expiry queues (`load/in-flight.ts`).
 *
 * The consumed prefix is cut off once it is over 1024 items and half the array, and
 * the array is dropped whenever the queue empties, so memory follows what is queued.
 */

/** Consumed items kept before the array is compacted. */
const COMPACT_AFTER = 1024;

export class Fifo<T> {
  #items: (T | undefined)[] = [];
  #head = 0;

  /** Items queued. */
  get length(): number {
    return this.#items.length - this.#head;
  }

  push(item: T): void {
    this.#items.push(item);
  }

  /** The oldest item, left in place; undefined when empty. */
  peek(): T | undefined {
    return this.#items[this.#head];
  }

  /** Remove and return the oldest item; undefined when empty. */
  shift(): T | undefined {
    if (this.#head === this.#items.length) return undefined;
    const item = this.#items[this.#head];
    // Let the consumed item be collected before the next compaction.
    this.#items[this.#head++] = undefined;
    if (this.#head === this.#items.length) {
      this.#items = [];
      this.#head = 0;
    } else if (this.#head > COMPACT_AFTER && this.#head * 2 > this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
    return item;
  }

  /**
   * Replaces queued items by `f(item)`, newest first, up to the first one `f` returns
   * unchanged (which stays, with everything older).
   */
  replaceNewest(f: (item: T) => T): void {
    const items = this.#items;
    for (let i = items.length - 1; i >= this.#head; i--) {
      const item = items[i] as T;
      const next = f(item);
      if (next === item) return;
      items[i] = next;
    }
  }

  clear(): void {
    this.#items = [];
    this.#head = 0;
  }
}
