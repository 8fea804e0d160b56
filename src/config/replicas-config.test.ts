import { describe, expect, it } from "vitest";
import { loadConfig } from "./index.js";

function outcome(file: string, env: Record<string, string> = {}) {
  return loadConfig({ argv: [], env, defaultFile: "mem.yaml", readFile: () => file });
}

function problems(file: string, env: Record<string, string> = {}): string[] {
  const o = outcome(file, env);
  if (o.kind !== "invalid") throw new Error(`expected invalid, got ${o.kind}`);
  return o.issues.map((i) => `${i.key}: ${i.message}`);
}

describe("replicas section", () => {
  it("is off by default", () => {
    const o = outcome("{}\n");
    if (o.kind !== "ok") throw new Error(o.kind);
    expect(o.config.replicas).toEqual({
      redisUrl: null,
      id: null,
      keyPrefix: "kvrouter",
      heartbeatMs: 500,
      staleAfterMs: 3000,
      commandTimeoutMs: 500,
      maxPendingFlushes: 64,
      shareKeys: true,
    });
  });

  it("is read from the environment too", () => {
    const o = outcome("{}\n", { KVROUTER_REPLICAS_REDIS_URL: "redis://redis:6379" });
    if (o.kind !== "ok") throw new Error(o.kind);
    expect(o.config.replicas.redisUrl).toBe("redis://redis:6379");
  });

  it.each([
    [
      "replicas:\n  redisUrl: localhost:6379\n",
      'replicas.redisUrl: must be a redis:// or rediss:// URL, got "localhost:6379"',
    ],
    ["replicas:\n  id: 'a b'\n", 'replicas.id: must be 1-128 of A-Z a-z 0-9 . _ : -, got "a b"'],
    [
      "replicas:\n  heartbeatMs: 2000\n",
      "replicas.heartbeatMs: must be at most half of replicas.staleAfterMs (3000), got 2000",
    ],
    [
      "replicas:\n  staleAfterMs: 5\n",
      "replicas.staleAfterMs: must be an integer in [20, 600000], got 5",
    ],
    ["replicas:\n  redis: x\n", "replicas.redis: unknown key"],
  ])("%j", (file, expected) => {
    const found = problems(file);
    expect(
      found.some((p) => p.startsWith(expected)),
      found.join("\n"),
    ).toBe(true);
  });
});
