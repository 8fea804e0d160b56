/**
 * The layout rules of docs/architecture.md, checked on the source: which folder may import
 * which (dependencies point one way, the core imports no framework), and no long file
 * without a stated reason. A new folder must be added to the table here and in the doc.
 */

import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const SRC = fileURLToPath(new URL("../src", import.meta.url));

/** Folder (or top-level module) → what it may import, of ours and of the frameworks. */
const ALLOWED: Readonly<Record<string, readonly string[]>> = {
  protocol: [],
  util: [],
  index: ["protocol", "util"],
  load: ["protocol", "util"],
  scheduler: ["protocol", "index", "load", "util"],
  predict: ["protocol", "index", "util"],
  "router.ts": [
    ...["protocol", "index", "load", "scheduler", "predict", "util", "router-types.ts"],
    "router-columns.ts",
  ],
  "router-columns.ts": ["protocol", "index", "load", "scheduler", "router-types.ts"],
  "router-types.ts": ["protocol", "index", "load", "scheduler", "predict"],
  transport: ["util", "zeromq"],
  engine: ["protocol", "transport", "util", "zeromq"],
  ingest: ["protocol", "index", "load", "transport", "util", "worker-thread.ts", "zeromq"],
  config: ["protocol", "scheduler", "util", "yaml"],
  fleet: ["config", "protocol", "index", "load", "ingest", "util"],
  replicas: ["config", "protocol", "load", "util", "ioredis"],
  telemetry: [
    ...["config", "protocol", "index", "load", "ingest", "replicas", "predict", "util"],
    ...["pino", "prom-client"],
  ],
  gateway: [
    ...["config", "protocol", "index", "load", "scheduler", "router.ts", "tokenize"],
    ...["telemetry", "util", "prom-client"],
  ],
  http: [
    ...["config", "fleet", "protocol", "index", "load", "scheduler", "router.ts", "ingest"],
    ...["replicas", "gateway", "telemetry", "predict", "util", "fastify", "prom-client"],
  ],
  service: [
    ...["config", "fleet", "protocol", "index", "load", "scheduler", "router.ts", "ingest"],
    ...["transport", "replicas", "telemetry", "http", "gateway", "tokenize", "predict", "util"],
    ...["lifetime.ts", "yaml", "fastify", "prom-client"],
  ],
  tokenize: ["util", "worker-thread.ts"],
  sim: ["protocol", "engine", "transport", "tokenize", "util", "lifetime.ts", "fastify", "zeromq"],
  replay: [
    ...["protocol", "index", "load", "scheduler", "predict", "router.ts", "config", "sim"],
    ...["replicas", "util"],
  ],
  demo: ["sim", "tokenize", "util", "lifetime.ts", "yaml"],
  "lifetime.ts": [],
  "worker-thread.ts": [],
  "cli.ts": ["service", "sim", "replay", "demo", "config", "lifetime.ts"],
};

/** Frameworks the rules above talk about; other packages (node:*, small libraries) pass. */
const FRAMEWORKS = ["zeromq", "fastify", "pino", "prom-client", "yaml", "ioredis"];

/** Above this many lines a file says why it is one file (a "Long file:" note in its header). */
const LONG_FILE_LINES = 350;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return name.endsWith(".ts") && !name.endsWith(".test.ts") && name !== "test-helpers.ts"
      ? [path]
      : [];
  });
}

const groupOf = (file: string): string => relative(SRC, file).split("/")[0]!;

const IMPORT_RE = /(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+"([^"]+)"/g;

function importsOf(file: string): { group: string; spec: string }[] {
  const text = readFileSync(file, "utf8");
  const out: { group: string; spec: string }[] = [];
  for (const m of text.matchAll(IMPORT_RE)) {
    const spec = m[1]!;
    if (spec.startsWith(".")) {
      const target = join(file, "..", spec);
      const group = groupOf(target).replace(/\.js$/, ".ts");
      if (group !== groupOf(file)) out.push({ group, spec });
    } else {
      const pkg = spec.startsWith("@")
        ? spec.split("/").slice(0, 2).join("/")
        : spec.split("/")[0]!;
      if (FRAMEWORKS.includes(pkg)) out.push({ group: pkg, spec });
    }
  }
  return out;
}

const files = sourceFiles(SRC);

describe("source layout", () => {
  it("every folder of src/ is in the dependency table", () => {
    const groups = new Set(files.map(groupOf));
    expect([...groups].filter((g) => !(g in ALLOWED))).toEqual([]);
  });

  it("imports follow the dependency direction of docs/architecture.md", () => {
    const violations: string[] = [];
    for (const file of files) {
      const allowed = ALLOWED[groupOf(file)] ?? [];
      for (const { group, spec } of importsOf(file)) {
        if (!allowed.includes(group)) violations.push(`${relative(SRC, file)} imports ${spec}`);
      }
    }
    expect(violations).toEqual([]);
  });

  it("a file over the line budget says why it is one file", () => {
    const unexplained = files.filter((file) => {
      const text = readFileSync(file, "utf8");
      return text.split("\n").length > LONG_FILE_LINES && !/Long file:/.test(text.slice(0, 3000));
    });
    expect(unexplained.map((f) => relative(SRC, f))).toEqual([]);
  });

  it("the checker sees a violation when there is one", () => {
    // The regex and the grouping must find a known cross-folder import.
    const service = files.find((f) => relative(SRC, f) === "service/service.ts")!;
    expect(importsOf(service).map((i) => i.group)).toContain("http");
  });
});
