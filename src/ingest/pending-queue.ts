/**
 * A FIFO of live messages waiting while a replay is in flight. An array with a moving
 * head, so draining a long backlog is O(n) rather than O(n²) with `shift()`.
 */

import type { DecodeReply } from "./decode-thread.js";

export interface PendingMessage {
  readonly seq: bigint;
  readonly payload: Uint8Array;
  /** The payload's decode, when it was decoded ahead (on the decode thread). */
  readonly decoded?: DecodeReply | null;
}

export class PendingQueue {
  #items: PendingMessage[] = [];
  #head = 0;

  get length(): number {
    return this.#items.length - this.#head;
  }

  push(item: PendingMessage): void {
    this.#items.push(item);
  }

  peek(): PendingMessage | undefined {
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
