import { describe, expect, it } from "vitest";
import { endpointForRank, splitTcpEndpoint } from "./endpoint.js";

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
