import { describe, expect, it } from "vitest";
import { endpointForRank, splitTcpEndpoint } from "./endpoint.js";
import { PendingQueue } from "./pending-queue.js";

describe("endpointForRank", () => {
  it("offsets the port by the rank", () => {
    expect(endpointForRank("tcp://10.0.0.5:5557", 0)).toBe("tcp://10.0.0.5:5557");
    expect(endpointForRank("tcp://10.0.0.5:5557", 3)).toBe("tcp://10.0.0.5:5560");
    expect(endpointForRank("tcp://*:5558", 1)).toBe("tcp://*:5559");
    expect(endpointForRank("tcp://[::1]:5557", 2)).toBe("tcp://[::1]:5559");
  });

  it("leaves ephemeral binds alone and rejects what it cannot offset", () => {
    expect(endpointForRank("tcp://127.0.0.1:*", 1)).toBe("tcp://127.0.0.1:*");
    expect(endpointForRank("ipc:///tmp/x", 0)).toBe("ipc:///tmp/x");
    expect(() => endpointForRank("ipc:///tmp/x", 1)).toThrow(/no tcp port/);
    expect(() => endpointForRank("tcp://h:65535", 1)).toThrow(/exceeds/);
    expect(() => endpointForRank("tcp://h:1", -1)).toThrow(/invalid dp rank/);
    expect(splitTcpEndpoint("tcp://h:0")).toBeNull();
  });
});

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
