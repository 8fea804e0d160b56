import { describe, expect, it } from "vitest";
import { PendingQueue } from "./pending-queue.js";

describe("PendingQueue", () => {
  it("is FIFO across compactions", () => {
    const q = new PendingQueue();
    const payload = new Uint8Array(0);
    for (let i = 0; i < 5000; i++) q.push({ seq: BigInt(i), payload });
    const seen: bigint[] = [];
    for (let i = 0; i < 3000; i++) {
      seen.push(q.peek()!.seq);
      q.dropHead();
    }
    q.push({ seq: 5000n, payload });
    while (q.length > 0) {
      seen.push(q.peek()!.seq);
      q.dropHead();
    }
    expect(seen).toEqual(Array.from({ length: 5001 }, (_, i) => BigInt(i)));
    expect(q.peek()).toBeUndefined();
  });
});
