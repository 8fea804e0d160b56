import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { DEFAULT_SCHEDULER_CONFIG } from "../scheduler/defaults.js";
import {
  DEFAULT_CONFIG_FILE,
  envNameOf,
  type KvrouterConfig,
  type LoadConfigOptions,
  loadConfig,
  redactConfig,
} from "./index.js";

const WORKER = { id: "w0", url: "http://127.0.0.1:9000" };

/** Load from an in-memory file; `file` null = no file. */
function load(file: string | null, opts: Partial<LoadConfigOptions> = {}) {
  return loadConfig({
    argv: [],
    env: {},
    defaultFile: file === null ? null : "mem.yaml",
    readFile: () => file ?? "",
    ...opts,
  });
}

function ok(outcome: ReturnType<typeof load>): KvrouterConfig {
  if (outcome.kind !== "ok") throw new Error(`expected ok, got ${JSON.stringify(outcome)}`);
  return outcome.config;
}

describe("loadConfig", () => {
  it("gives the documented defaults with no file", () => {
    const c = ok(load(null));
    expect(c.server).toEqual({
      host: "127.0.0.1",
      port: 8080,
      bodyLimitBytes: 4 * 1024 * 1024,
      authToken: null,
      allowUnauthenticated: false,
      decisionToken: null,
      requestTimeoutMs: 30_000,
      headersTimeoutMs: 10_000,
      keepAliveTimeoutMs: 72_000,
      maxConnections: 8192,
      drainMs: 2000,
      maxJsonDepth: 64,
      maxPromptTokens: 262_144,
      maxTokenId: 16_777_215,
      onAllStale: "route",
      routeCandidates: 32,
    });
    expect(c.inFlight.maxPerWorker).toBe(8192);
    expect(c.index.blockSize).toBe(16);
    expect(c.index.maxBlocks).toBe(20_000_000);
    expect(c.scheduler).toEqual(DEFAULT_SCHEDULER_CONFIG);
    expect(c.log.level).toBe("info");
    expect(c.workers).toEqual([]);
    expect(Object.isFrozen(c)).toBe(true);
    expect(Object.isFrozen(c.server)).toBe(true);
    expect(Object.isFrozen(c.workers)).toBe(true);
  });

  it("uses the embedded default file: four simulated workers on loopback", () => {
    const outcome = loadConfig({ argv: [], env: {} });
    expect(outcome.kind === "ok" && outcome.file).toBe(DEFAULT_CONFIG_FILE);
    const c = ok(outcome);
    expect(c.server.port).toBe(8080);
    expect(c.workers.map((w) => [w.id, w.url, w.eventsEndpoint, w.metricsUrl])).toEqual([
      ["sim-0", "http://127.0.0.1:8001", "tcp://127.0.0.1:5601", "http://127.0.0.1:8001/metrics"],
      ["sim-1", "http://127.0.0.1:8002", "tcp://127.0.0.1:5602", "http://127.0.0.1:8002/metrics"],
      ["sim-2", "http://127.0.0.1:8003", "tcp://127.0.0.1:5603", "http://127.0.0.1:8003/metrics"],
      ["sim-3", "http://127.0.0.1:8004", "tcp://127.0.0.1:5604", "http://127.0.0.1:8004/metrics"],
    ]);
  });

  it("reads the example file without problems", () => {
    const c = ok(loadConfig({ argv: ["--config", "config/example.yaml"], env: {} }));
    expect(c.workers.length).toBeGreaterThan(0);
  });

  it("reads a real YAML file given with --config, and JSON too", () => {
    const dir = mkdtempSync(join(tmpdir(), "kvrouter-config-"));
    try {
      const yamlFile = join(dir, "c.yaml");
      writeFileSync(
        yamlFile,
        "server:\n  port: 9001\nworkers:\n  - id: a\n    url: http://127.0.0.1:1\n",
      );
      const jsonFile = join(dir, "c.json");
      writeFileSync(jsonFile, JSON.stringify({ server: { port: 9002 }, workers: [WORKER] }));
      expect(ok(loadConfig({ argv: ["--config", yamlFile], env: {} })).server.port).toBe(9001);
      expect(ok(loadConfig({ argv: [`--config=${jsonFile}`], env: {} })).server.port).toBe(9002);
      const fromEnv = loadConfig({ argv: [], env: { KVROUTER_CONFIG: jsonFile } });
      expect(ok(fromEnv).server.port).toBe(9002);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("fills worker defaults", () => {
    const c = ok(load(JSON.stringify({ workers: [WORKER] })));
    expect(c.workers[0]).toEqual({
      id: "w0",
      url: "http://127.0.0.1:9000",
      eventsEndpoint: null,
      replayEndpoint: null,
      topic: "",
      dpSize: 1,
      metricsUrl: "http://127.0.0.1:9000/metrics",
      kind: "vllm",
      model: null,
      blockSize: 16,
      numGpuBlocks: null,
    });
  });

  it("applies precedence: defaults < file < env < flags", () => {
    const file = "server:\n  port: 9000\n  host: 127.0.0.2\nlog:\n  level: warn\n";
    const env = { KVROUTER_SERVER_PORT: "9100", KVROUTER_LOG_LEVEL: "error" };
    const c = ok(load(file, { env, argv: ["--port", "9200"] }));
    expect(c.server.port).toBe(9200);
    expect(c.server.host).toBe("127.0.0.2");
    expect(c.log.level).toBe("error");
    expect(ok(load(file, { env })).server.port).toBe(9100);
  });

  it("overrides every kind of setting from env and flags", () => {
    const c = ok(
      load(null, {
        env: {
          KVROUTER_SERVER_AUTH_TOKEN: "secret",
          KVROUTER_SCHEDULER_WEIGHTS_HOST: "0.3",
          KVROUTER_LOAD_STALE_AFTER_MS: "7000",
          KVROUTER_WORKERS: JSON.stringify([WORKER]),
        },
        argv: [
          "--set",
          "scheduler.temperature=0.5",
          "--set=scheduler.stalePolicy=penalise",
          "--log-level=debug",
          "--host",
          "localhost",
          "--block-size",
          "32",
        ],
      }),
    );
    expect(c.server.authToken).toBe("secret");
    expect(c.scheduler.weights.host).toBe(0.3);
    expect(c.scheduler.temperature).toBe(0.5);
    expect(c.scheduler.stalePolicy).toBe("penalise");
    expect(c.load.staleAfterMs).toBe(7000);
    expect(c.log.level).toBe("debug");
    expect(c.server.host).toBe("localhost");
    expect(c.index.blockSize).toBe(32);
    expect(c.workers.map((w) => [w.id, w.blockSize])).toEqual([["w0", 32]]);
  });

  it("reads null as 'off' for the scheduler's exclusion thresholds", () => {
    const c = ok(load("scheduler:\n  kvHardCap: null\n  outlierStdK: .inf\n"));
    expect(c.scheduler.kvHardCap).toBe(Infinity);
    expect(c.scheduler.outlierStdK).toBe(Infinity);
  });

  it("turns the exclusion thresholds off from env and flags with null, off or inf", () => {
    for (const word of ["null", "off", "inf", "Infinity"]) {
      const c = ok(
        load(null, {
          env: { KVROUTER_SCHEDULER_KV_HARD_CAP: word },
          argv: ["--set", `scheduler.outlierStdK=${word}`],
        }),
      );
      expect(c.scheduler.kvHardCap, word).toBe(Infinity);
      expect(c.scheduler.outlierStdK, word).toBe(Infinity);
    }
    // Elsewhere "off" is no number.
    expect(load(null, { env: { KVROUTER_SCHEDULER_TEMPERATURE: "off" } }).kind).toBe("invalid");
  });

  it("derives env names from the keys", () => {
    expect(envNameOf("load", "scrapeIntervalMs")).toBe("KVROUTER_LOAD_SCRAPE_INTERVAL_MS");
    expect(envNameOf("server", "port")).toBe("KVROUTER_SERVER_PORT");
  });

  it("masks the tokens in printable copies", () => {
    const c = ok(
      load(null, { argv: ["--auth-token", "s3cret", "--set", "server.decisionToken=d3cision"] }),
    );
    expect(JSON.stringify(redactConfig(c))).not.toContain("s3cret");
    expect(JSON.stringify(redactConfig(c))).not.toContain("d3cision");
    expect(c.server.authToken).toBe("s3cret");
    expect(c.server.decisionToken).toBe("d3cision");
  });

  it("answers --help with the usage text", () => {
    const outcome = load(null, { argv: ["--help"] });
    expect(outcome.kind === "help" && outcome.text).toContain("--config FILE");
  });
});
