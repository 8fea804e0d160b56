import { existsSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { DEFAULT_TRACE, parseReplayArgs, ReplayUsageError } from "./options.js";
import { PEER_POLICY_NAMES, POLICY_NAMES } from "./policies.js";

describe("parseReplayArgs", () => {
  it("fills defaults and expands --policy all", () => {
    const o = parseReplayArgs(["--trace", "t.jsonl"])!;
    expect(o.policies).toEqual([...POLICY_NAMES]);
    expect(parseReplayArgs(["--policy", "peers"])!.policies).toEqual([...PEER_POLICY_NAMES]);
    expect(parseReplayArgs(["--policy", "baselines"])!.policies).toEqual([
      "kv",
      "round_robin",
      "random",
      "least_loaded",
    ]);
    expect(o.workers).toBe(8);
    expect(o.capacityBlocks).toBeNull();
    expect(o.blockSize).toBe(16);
  });

  it("turns tokens into blocks and reads weights", () => {
    const o = parseReplayArgs([
      "--trace=t",
      "--capacity-tokens",
      "2000000",
      "--policy",
      "kv",
      "--policy",
      "round_robin",
      "--weight",
      "decode=0.5",
    ])!;
    expect(o.capacityBlocks).toBe(125_000);
    expect(o.policies).toEqual(["kv", "round_robin"]);
    expect(o.scheduler.weights.decode).toBe(0.5);
  });

  it("takes inf to switch the KV exclusions off", () => {
    const o = parseReplayArgs(["--trace", "t", "--outlier-std-k", "inf", "--kv-hard-cap", "0.9"])!;
    expect(o.scheduler.outlierStdK).toBe(Number.POSITIVE_INFINITY);
    expect(o.scheduler.kvHardCap).toBe(0.9);
  });

  it("defaults to the trace slice shipped in the repository", () => {
    const o = parseReplayArgs([])!;
    expect(o.trace).toBe(DEFAULT_TRACE);
    expect(existsSync(DEFAULT_TRACE)).toBe(true);
  });

  it("returns null for --help", () => {
    expect(parseReplayArgs(["--help"])).toBeNull();
  });

  it.each([
    [["stray"], /unexpected argument 'stray'/],
    [["--trace", "t", "--workers", "0"], /--workers must be a positive integer, got '0'/],
    [
      ["--trace", "t", "--policy", "best"],
      /--policy must be one of kv, .*, kv_nopredict, kv_rate, earliest_first_token, baselines/,
    ],
    [["--trace", "t", "--capacity-blocks", "5", "--capacity-tokens", "80"], /not both/],
    [["--trace", "t", "--weight", "decode"], /KEY=VALUE/],
    [["--trace", "t", "--weight", "colour=1"], /unknown weight 'colour'/],
    [["--trace", "t", "--weight", "host=2"], /weights.host must be a number in 0..1/],
    [["--trace", "t", "--prefill-tps", "-3"], /--prefill-tps/],
    [["--trace", "t", "--bogus"], /bogus/],
  ])("rejects %j naming the flag", (argv, msg) => {
    expect(() => parseReplayArgs(argv)).toThrow(ReplayUsageError);
    expect(() => parseReplayArgs(argv)).toThrow(msg);
  });

  it("spells the prefill rate as the simulator does, keeping --prefill-tps as an alias", () => {
    expect(parseReplayArgs(["--prefill-tokens-per-s", "4000"])!.timing.prefillTokensPerSec).toBe(
      4000,
    );
    expect(parseReplayArgs(["--prefill-tps", "3000"])!.timing.prefillTokensPerSec).toBe(3000);
    expect(() => parseReplayArgs(["--prefill-tokens-per-s", "1", "--prefill-tps", "2"])).toThrow(
      ReplayUsageError,
    );
    expect(() => parseReplayArgs(["--prefill-tokens-per-s", "0"])).toThrow(
      /--prefill-tokens-per-s/,
    );
  });
});
