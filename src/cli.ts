#!/usr/bin/env node
/**
 * The `kvrouter` command: one entry point, one sub-command per program. Each
 * sub-command module exports `main(argv): Promise<number>` (the exit code) and is
 * loaded only when asked for, so `kvrouter serve` never loads the simulator.
 */

import { readFileSync } from "node:fs";
import { exitWithParent } from "./lifetime.js";

type SubMain = (argv: string[]) => Promise<number>;

const COMMANDS: Record<string, { describe: string; load: () => Promise<{ main: SubMain }> }> = {
  serve: { describe: "run the router service", load: () => import("./service/serve.js") },
  healthcheck: {
    describe: "exit 0 when the configured router answers /healthz (the image's HEALTHCHECK)",
    load: () => import("./service/healthcheck.js"),
  },
  "sim-worker": {
    describe: "run one simulated vLLM worker (no GPU)",
    load: () => import("./sim/sim-worker-main.js"),
  },
  demo: {
    describe: "router + 4 simulated workers, kv-aware vs round-robin",
    load: () => import("./demo/demo-main.js"),
  },
  replay: {
    describe: "replay a request trace through the router in virtual time",
    load: () => import("./replay/replay-main.js"),
  },
  trace: {
    describe:
      "generate a synthetic workload trace (trace gen KIND), or spread one's arrivals (trace spread FILE)",
    load: () => import("./replay/workloads/trace-gen-main.js"),
  },
};

/** The package version, from the package.json beside `src/` or `dist/`. */
function version(): string {
  const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as {
    version?: string;
  };
  return pkg.version ?? "unknown";
}

function usage(): string {
  const lines = Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(12)} ${c.describe}`);
  return `usage: kvrouter <command> [options]\n\ncommands:\n${lines.join("\n")}\n\nkvrouter <command> --help for a command's options; kvrouter --version\n`;
}

async function run(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === "--help" || name === "-h") {
    process.stdout.write(usage());
    return name === undefined ? 2 : 0;
  }
  if (name === "--version" || name === "-V") {
    process.stdout.write(`kvrouter ${version()}\n`);
    return 0;
  }
  const command = COMMANDS[name];
  if (command === undefined) {
    process.stderr.write(`kvrouter: unknown command '${name}'\n\n${usage()}`);
    return 2;
  }
  // Whoever started us (a shell, npm, the demo) going away means stop, even without a signal.
  exitWithParent();
  const mod = await command.load();
  return mod.main(rest);
}

run(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(
      `kvrouter: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exitCode = 1;
  },
);
