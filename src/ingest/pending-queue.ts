/**
 * A FIFO of live batches waiting while a replay is in flight. An array with a moving
 * head, so draining a long backlog is O(n) rather than O(n²) with `shift()`.
 */

export interface PendingMessage<P = unknown> {
  readonly seq: bigint;
  readonly payload: P;
}

export class PendingQueue<P = unknown> {
  #items: PendingMessage<P>[] = [];
  #head = 0;

  get length(): number {
    return this.#items.length - this.#head;
  }

  push(item: PendingMessage<P>): void {
    this.#items.push(item);
  }

  peek(): PendingMessage<P> | undefined {
    return this.#items[this.#head];
  }

  /** Drop the head (call after `peek`). */
  dropHead(): void {
    this.#head++;
    if (this.#head === this.#items.length) {
      this.#items = [];
      this.#head = 0;
    } else if (this.#head > 1024 && this.#head * 2 > this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
  }

  clear(): void {
    this.#items = [];
    this.#head = 0;
  }
}
