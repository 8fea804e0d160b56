import { describe, expect, it } from "vitest";
import { parseSimArgs, SimConfigError } from "./sim-config.js";

describe("parseSimArgs", () => {
  it("has vLLM-like defaults and a random seed", () => {
    const c = parseSimArgs([]);
    if (c === "help") throw new Error("help");
    expect(c).toMatchObject({
      host: "127.0.0.1",
      port: 8000,
      eventsPort: 5557,
      replayPort: 5558,
      topic: "",
      blockSize: 16,
      numGpuBlocks: 2048,
      maxModelLen: 2047 * 16,
      prefillOverheadMs: 10,
      eventForm: "map",
      hashForm: "uint64",
      dataParallelRank: 0,
    });
    expect(Object.isFrozen(c)).toBe(true);
    expect(Number.isInteger(c.seed)).toBe(true);
    expect(parseSimArgs(["--help"])).toBe("help");
  });

  it("reads LoRA adapters (--lora a,b) and refuses empty or the model's own name", () => {
    const c = parseSimArgs(["--lora", "sql-lora, chat-lora,sql-lora"]);
    if (c === "help") throw new Error("help");
    expect(c.loras).toEqual(["sql-lora", "chat-lora"]);
    const d = parseSimArgs([]);
    if (d === "help") throw new Error("help");
    expect(d.loras).toEqual([]);
    expect(() => parseSimArgs(["--lora", "a,,b"])).toThrow(SimConfigError);
    expect(() => parseSimArgs(["--lora", "sim-model"])).toThrow(/model's own name/);
  });

  it("reads every flag", () => {
    const c = parseSimArgs([
      "--host",
      "0.0.0.0",
      "--port",
      "9000",
      "--events-port",
      "off",
      "--replay-port",
      "off",
      "--topic",
      "kv",
      "--num-gpu-blocks",
      "100",
      "--block-size",
      "32",
      "--model",
      "m",
      "--prefill-tokens-per-s",
      "5000.5",
      "--prefill-overhead-ms",
      "0",
      "--decode-ms-per-token",
      "0.5",
      "--max-num-seqs",
      "3",
      "--max-model-len",
      "1000",
      "--data-parallel-rank",
      "1",
      "--event-encoding",
      "array",
      "--hash-encoding",
      "int64",
      "--seed",
      "4294967295",
    ]);
    expect(c).toMatchObject({
      host: "0.0.0.0",
      port: 9000,
      eventsPort: null,
      replayPort: null,
      topic: "kv",
      numGpuBlocks: 100,
      blockSize: 32,
      model: "m",
      prefillTokensPerSec: 5000.5,
      prefillOverheadMs: 0,
      decodeMsPerToken: 0.5,
      maxNumSeqs: 3,
      maxModelLen: 1000,
      dataParallelRank: 1,
      eventForm: "array",
      hashForm: "int64",
      seed: 4294967295,
    });
  });

  it.each([
    [["--port", "70000"], /--port must be an integer in \[0, 65535\]/],
    [["--block-size", "1.5"], /--block-size/],
    [["--num-gpu-blocks", "1"], /--num-gpu-blocks/],
    [["--prefill-tokens-per-s", "0"], /--prefill-tokens-per-s must be a positive number/],
    [["--decode-ms-per-token", "fast"], /--decode-ms-per-token/],
    [["--prefill-overhead-ms=-1"], /--prefill-overhead-ms must be a number ≥ 0/],
    [["--prefill-overhead-ms", ""], /--prefill-overhead-ms/],
    [["--event-encoding", "json"], /--event-encoding must be one of map, array/],
    [["--hash-encoding", "binary"], /--hash-encoding/],
    [["--max-model-len", "99999", "--num-gpu-blocks", "10"], /--max-model-len 99999 exceeds/],
    [["--events-port", "off"], /--replay-port needs --events-port/],
    [["--port", "65535", "--data-parallel-rank", "1"], /--port 65535 \+ --data-parallel-rank 1/],
    [["--seed", "-1"], /--seed/],
    [["--bogus"], /bogus/],
  ])("rejects %j", (argv, message) => {
    expect(() => parseSimArgs(argv)).toThrow(SimConfigError);
    expect(() => parseSimArgs(argv)).toThrow(message);
  });
});
