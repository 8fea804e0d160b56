import { describe, expect, it } from "vitest";
import { type LoadConfigOptions, loadConfig, validateConfig } from "./index.js";

function problems(file: string | null, opts: Partial<LoadConfigOptions> = {}): string[] {
  const outcome = loadConfig({
    argv: [],
    env: {},
    defaultFile: file === null ? null : "mem.yaml",
    readFile: () => file ?? "",
    ...opts,
  });
  if (outcome.kind !== "invalid") throw new Error(`expected invalid, got ${outcome.kind}`);
  return outcome.issues.map((i) => `${i.key}: ${i.message}`);
}

const W = "workers:\n  - id: w0\n    url: http://127.0.0.1:9000\n";

describe("config validation names the key and the bad value", () => {
  it.each([
    ["server:\n  port: 70000\n", "server.port: must be an integer in [0, 65535], got 70000"],
    ["server:\n  port: 80.5\n", "server.port: must be an integer in [0, 65535], got 80.5"],
    ['server:\n  port: "80"\n', 'server.port: must be an integer in [0, 65535], got "80"'],
    ["server:\n  host: 12\n", "server.host: must be a string, got 12"],
    ['server:\n  authToken: ""\n', 'server.authToken: must be a non-empty string or null, got ""'],
    [
      "server:\n  bodyLimitBytes: 10\n",
      "server.bodyLimitBytes: must be an integer in [1024, 268435456], got 10",
    ],
    [
      "log:\n  level: loud\n",
      'log.level: must be one of fatal, error, warn, info, debug, trace, silent, got "loud"',
    ],
    [
      "load:\n  staleAfterMs: -1\n",
      "load.staleAfterMs: must be an integer in [1, 86400000], got -1",
    ],
    [
      "load:\n  scrapeIntervalMs: 100\n  scrapeTimeoutMs: 200\n",
      "load.scrapeTimeoutMs: must not exceed load.scrapeIntervalMs (100), got 200",
    ],
    [
      // Scraped every 10 s, stale after 5 s: every worker stale half of the time.
      "load:\n  scrapeIntervalMs: 10000\n",
      "load.staleAfterMs: must exceed load.scrapeIntervalMs + load.scrapeTimeoutMs (10500), got 5000: a worker answering every scrape would go stale between two",
    ],
    ["gateway:\n  enabled: yes\n", 'gateway.enabled: must be true or false, got "yes"'],
    [
      "snapshot:\n  fromPeer: router-a:8080\n",
      'snapshot.fromPeer: must be an http:// or https:// URL of another kvrouter, got "router-a:8080"',
    ],
    [
      "snapshot:\n  fromPeerTimeoutMs: 5\n",
      "snapshot.fromPeerTimeoutMs: must be an integer in [100, 600000], got 5",
    ],
    ["gateway:\n  maxAttempts: 0\n", "gateway.maxAttempts: must be an integer in [1, 10], got 0"],
    [
      "gateway:\n  busyKvUsage: -0.5\n",
      "gateway.busyKvUsage: must be a number in [0, 10], got -0.5",
    ],
    ["gateway:\n  retries: 2\n", "gateway.retries: unknown key"],
    ["gateway:\n  tokenizers: a=/x,a=/y\n", 'gateway.tokenizers: names model "a" twice'],
    ["gateway:\n  tokenizers: '=/x'\n", 'gateway.tokenizers: entry "=/x" must be MODEL=DIR or DIR'],
    ["server: 8080\n", "server: must be a mapping, got 8080"],
    ["sever:\n  port: 1\n", "sever: unknown key; did you mean `server`?"],
    ["server:\n  prot: 1\n", "server.prot: unknown key; did you mean `port`?"],
    ["server:\n  bodyLimit: 1\n", "server.bodyLimit: unknown key; did you mean `bodyLimitBytes`?"],
    ["server:\n  colour: 1\n", "server.colour: unknown key"],
    [
      "scheduler:\n  temprature: 1\n",
      "scheduler.temprature: unknown key; did you mean `temperature`?",
    ],
    [
      "scheduler:\n  temperature: -1\n",
      "scheduler.temperature: must be a number in 0..1000000, got -1",
    ],
    [
      "scheduler:\n  weights:\n    host: 2\n",
      "scheduler.weights.host: must be a number in 0..1, got 2",
    ],
    [
      "scheduler:\n  stalePolicy: drop\n",
      'scheduler.stalePolicy: must be one of exclude, penalise, got "drop"',
    ],
    ["scheduler:\n  weights:\n    gpu: 1\n", "scheduler.weights.gpu: unknown key"],
    ["workers: {}\n", "workers: must be a list, got {}"],
    ["workers:\n  - 3\n", "workers[0]: must be a mapping, got 3"],
    [
      `${W}    url: ftp://x\n`.replace("    url: http://127.0.0.1:9000\n", ""),
      'workers[0].url: must be an http(s) URL, got "ftp://x"',
    ],
    [
      `${W}    kind: trtllm\n`,
      'workers[0].kind: must be one of vllm, sglang, mooncake-store, got "trtllm"',
    ],
    [`${W}    dpSize: 0\n`, "workers[0].dpSize: must be an integer in [1, 1024], got 0"],
    [
      `${W}    eventsEndpoint: 127.0.0.1:5557\n`,
      'workers[0].eventsEndpoint: must be tcp://host:port, got "127.0.0.1:5557"',
    ],
    [
      `${W}    eventsEndpoint: tcp://127.0.0.1:65535\n    dpSize: 2\n`,
      'workers[0].eventsEndpoint: leaves no room for 2 ranks (port + rank must be ≤ 65535), got "tcp://127.0.0.1:65535"',
    ],
    [
      `${W}    replayEndpoint: tcp://127.0.0.1:5558\n`,
      'workers[0].replayEndpoint: needs eventsEndpoint too, got "tcp://127.0.0.1:5558"',
    ],
    [`${W}    blockSize: 32\n`, "workers[0].blockSize: must equal index.blockSize (16), got 32"],
    [
      `${W}    numGpuBlocks: 0\n`,
      "workers[0].numGpuBlocks: must be a positive integer or null, got 0",
    ],
    [
      `${W}    metricsUrl: nope\n`,
      'workers[0].metricsUrl: must be an http(s) URL or null, got "nope"',
    ],
    [`${W}    model: ""\n`, 'workers[0].model: must be a non-empty string or null, got ""'],
    [`${W}    colour: red\n`, "workers[0].colour: unknown key"],
    [
      "workers:\n  - id: 'a#1'\n    url: http://127.0.0.1:1\n",
      "workers[0].id: must be 1-64 characters of letters, digits, '.', '_', ':', '-', got \"a#1\"",
    ],
    [`${W}${W.replace("workers:\n", "")}`, 'workers[1].id: duplicate id "w0"'],
    ["server: [\n", "mem.yaml: is not valid YAML/JSON"],
  ])("%j", (file, expected) => {
    const found = problems(file);
    expect(
      found.some((p) => p.startsWith(expected)),
      found.join("\n"),
    ).toBe(true);
  });

  it("reports every problem at once", () => {
    const found = problems(
      "server:\n  port: -1\n  host: 1\nlog:\n  level: x\nworkers:\n  - id: ''\n",
    );
    expect(found).toHaveLength(5);
    expect(found.map((p) => p.split(":")[0])).toEqual([
      "server.host",
      "server.port",
      "log.level",
      "workers[0].id",
      "workers[0].url",
    ]);
  });

  it("reports every scheduler problem at once, with values quoted", () => {
    const found = problems(
      "scheduler:\n  temperature: -1\n  stalePolicy: drop\n  weights:\n    host: 2\n    queue: x\n",
    );
    expect(found).toEqual([
      'scheduler.stalePolicy: must be one of exclude, penalise, got "drop"',
      'scheduler.weights.queue: must be a number in 0..1000000, got "x"',
      "scheduler.weights.host: must be a number in 0..1, got 2",
      "scheduler.temperature: must be a number in 0..1000000, got -1",
    ]);
    expect(problems(null, { env: { KVROUTER_SCHEDULER_TEMPERATURE: "" } })).toEqual([
      'scheduler.temperature (from KVROUTER_SCHEDULER_TEMPERATURE): must be a number in 0..1000000, got ""',
    ]);
  });

  it("treats null as an error in the scheduler section too, except for the two thresholds", () => {
    expect(problems("scheduler:\n  temperature: null\n  stalePenalty: null\n")).toEqual([
      "scheduler.temperature: must be a number in 0..1000000, got null",
      "scheduler.stalePenalty: must be a finite number ≥ 0, got null",
    ]);
    expect(problems("scheduler:\n  weights: null\n")).toEqual([
      "scheduler.weights: must be a mapping, got null",
    ]);
    expect(problems("scheduler:\n  weights:\n    host: null\n")).toEqual([
      "scheduler.weights.host: must be a number in 0..1, got null",
    ]);
    expect(problems("scheduler: null\n")).toEqual(["scheduler: must be a mapping, got null"]);
  });

  it("reads only plain decimal numbers from env and flags", () => {
    expect(problems(null, { env: { KVROUTER_SERVER_PORT: "0x50" } })).toEqual([
      'server.port (from KVROUTER_SERVER_PORT): must be an integer in [0, 65535], got "0x50"',
    ]);
    expect(problems(null, { argv: ["--set", "load.staleAfterMs=0b11"] })[0]).toContain('"0b11"');
    const outcome = loadConfig({
      argv: ["--port", " 8081 "],
      env: { KVROUTER_LOAD_STALE_AFTER_MS: "2.5e3" },
      defaultFile: null,
    });
    expect(outcome.kind === "ok" && outcome.config.server.port).toBe(8081);
    expect(outcome.kind === "ok" && outcome.config.load.staleAfterMs).toBe(2500);
  });

  it("checks cross-field rules even when other keys are bad", () => {
    const found = problems(
      "server:\n  port: -1\nload:\n  scrapeIntervalMs: 100\n  scrapeTimeoutMs: 200\ninFlight:\n  ttlMs: 1000\n  prefillTtlMs: 2000\n",
    );
    expect(found.map((p) => p.split(":")[0])).toEqual([
      "server.port",
      "load.scrapeTimeoutMs",
      "inFlight.prefillTtlMs",
    ]);
    // …but not when one of their own fields is already wrong.
    expect(problems("load:\n  scrapeIntervalMs: 0\n  scrapeTimeoutMs: 200\n")).toHaveLength(1);
  });

  it("names the environment variable a bad value came from", () => {
    expect(problems(null, { env: { KVROUTER_SERVER_PORT: "eighty" } })).toEqual([
      'server.port (from KVROUTER_SERVER_PORT): must be an integer in [0, 65535], got "eighty"',
    ]);
    expect(problems(null, { env: { KVROUTER_SCHEDULER_WEIGHTS_QUEUE: "-2" } })).toEqual([
      "scheduler.weights.queue (from KVROUTER_SCHEDULER_WEIGHTS_QUEUE): must be a number in 0..1000000, got -2",
    ]);
    expect(problems(null, { env: { KVROUTER_WORKERS: "[{" } })[0]).toMatch(
      /^KVROUTER_WORKERS: must be a JSON list of workers/,
    );
    expect(problems(null, { env: { KVROUTER_WORKERS: '[{"id":"x"}]' } })).toEqual([
      "workers[0].url (from KVROUTER_WORKERS): must be an http(s) URL, got nothing",
    ]);
  });

  it("names the flag a bad value came from, and rejects unknown flags", () => {
    expect(problems(null, { argv: ["--port", "http"] })).toEqual([
      'server.port (from --port): must be an integer in [0, 65535], got "http"',
    ]);
    expect(problems(null, { argv: ["--set", "load.staleAfterMs=0"] })).toEqual([
      "load.staleAfterMs (from --set load.staleAfterMs): must be an integer in [1, 86400000], got 0",
    ]);
    expect(problems(null, { argv: ["--prot", "1"] })[0]).toBe(
      "--prot: unknown option; did you mean `--port`? (see --help)",
    );
    expect(problems(null, { argv: ["--port"] })[0]).toBe("--port: needs a value");
    expect(problems(null, { argv: ["--set", "server.nope=1"] })[0]).toMatch(
      /^--set server.nope=1: expected KEY=VALUE/,
    );
  });

  it("says which file could not be read", () => {
    const found = problems(null, {
      argv: ["--config", "/nonexistent/kvrouter.yaml"],
      readFile: undefined,
    });
    expect(found).toEqual(["/nonexistent/kvrouter.yaml: cannot read config file (ENOENT)"]);
  });

  it("warns about, but accepts, unknown KVROUTER_ variables", () => {
    const outcome = loadConfig({ argv: [], env: { KVROUTER_SERVR_PORT: "1" }, defaultFile: null });
    expect(outcome.kind === "ok" && outcome.warnings).toEqual([
      "ignoring unknown environment variable KVROUTER_SERVR_PORT; did you mean KVROUTER_SERVER_PORT?",
    ]);
  });

  it("refuses a non-loopback address without a token, unless told explicitly", () => {
    const issues = (raw: unknown) => {
      const r = validateConfig(raw);
      return r.ok ? [] : r.issues;
    };
    const open = issues({ server: { host: "0.0.0.0" } });
    expect(open).toHaveLength(1);
    expect(open[0]!.key).toBe("server.authToken");
    expect(open[0]!.message).toMatch(/"0\.0\.0\.0", which is not a loopback address/);
    expect(open[0]!.message).toMatch(/server\.allowUnauthenticated: true/);
    expect(issues({ server: { host: "0.0.0.0", authToken: "s3cret" } })).toEqual([]);
    expect(issues({ server: { host: "::", allowUnauthenticated: true } })).toEqual([]);
    for (const host of ["127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]"]) {
      expect(issues({ server: { host } })).toEqual([]);
    }
    for (const host of ["10.0.0.5", "::", "router.internal", "128.0.0.1"]) {
      expect(issues({ server: { host } }).map((i) => i.key)).toEqual(["server.authToken"]);
    }
    expect(issues({ server: { requestTimeoutMs: 1000, headersTimeoutMs: 2000 } })).toEqual([
      {
        key: "server.headersTimeoutMs",
        message: "must not exceed server.requestTimeoutMs (1000), got 2000",
      },
    ]);
    expect(issues({ server: { allowUnauthenticated: "yes" } })[0]).toMatchObject({
      key: "server.allowUnauthenticated",
      message: 'must be true or false, got "yes"',
    });
  });
});
