/**
 * Reading the configuration's sources: command-line flags and `KVROUTER_*` environment
 * variables. This module and `load-config.ts` are the only readers of argv and env
 * (passed in, never taken from `process`), so every other module gets a typed config.
 */

import { envNameOf, type FieldSpec, fieldPaths, SCHEDULER_PATHS } from "./fields.js";
import { type ConfigIssue, closest, unknownKey } from "./issues.js";

/** One value set from outside the file, with where it came from for error messages. */
export interface Override {
  /** Dotted path: `server.port`, or `workers` for a JSON list. */
  readonly path: string;
  readonly value: unknown;
  readonly origin: string;
}

export interface ParsedArgs {
  readonly configFile: string | null;
  readonly help: boolean;
  /** Validate, print the effective config, exit. */
  readonly check: boolean;
  readonly overrides: readonly Override[];
}

/** Named flags for the settings people change most; everything else via `--set`. */
const FLAG_PATHS: Readonly<Record<string, string>> = {
  "--host": "server.host",
  "--port": "server.port",
  "--log-level": "log.level",
  "--auth-token": "server.authToken",
  "--body-limit": "server.bodyLimitBytes",
  "--max-prompt-tokens": "server.maxPromptTokens",
  "--block-size": "index.blockSize",
};

export const USAGE = `usage: kvrouter serve [options]

  -c, --config FILE        YAML or JSON config (default: the embedded config/default.yaml)
      --host HOST          server.host
      --port PORT          server.port
      --log-level LEVEL    log.level (fatal|error|warn|info|debug|trace|silent)
      --auth-token TOKEN   server.authToken
      --body-limit BYTES   server.bodyLimitBytes
      --max-prompt-tokens N  server.maxPromptTokens
      --block-size N       index.blockSize
      --set KEY=VALUE      any scalar setting, e.g. --set load.staleAfterMs=3000
      --check              validate, print the effective config and exit
  -h, --help               this text

Environment: KVROUTER_CONFIG (file), KVROUTER_WORKERS (JSON list of workers) and
KVROUTER_<SECTION>_<KEY> for every setting (e.g. KVROUTER_SERVER_PORT).
Precedence: flags > environment > file > defaults. See docs/configuration.md.
`;

/** Every overridable scalar path and how its text is read. */
const SPECS: ReadonlyMap<string, FieldSpec["kind"]> = new Map([
  ...fieldPaths().map((f) => [`${f.section}.${f.key}`, f.spec.kind] as const),
  ...Object.entries(SCHEDULER_PATHS).map(([p, kind]) => [`scheduler.${p}`, kind] as const),
]);

/** Paths where null (or `off` / `inf`) means "no threshold" (read as Infinity). */
const OFF_PATHS: ReadonlySet<string> = new Set(["scheduler.outlierStdK", "scheduler.kvHardCap"]);
const OFF_WORDS: ReadonlySet<string> = new Set(["null", "off", "inf", "infinity"]);
/** A decimal number: optional sign, digits with an optional fraction, optional exponent. */
const DECIMAL = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;

/** `scheduler.weights.host` → `KVROUTER_SCHEDULER_WEIGHTS_HOST`. */
function envNameOfPath(path: string): string {
  const [section, ...rest] = path.split(".");
  return envNameOf(section!, rest.join("_"));
}

/**
 * Turn a string from env/argv into the field's type. A string that does not parse is
 * returned unchanged so the validator reports it with the key, origin and value.
 */
export function coerce(path: string, text: string): unknown {
  const kind = SPECS.get(path);
  if (kind === undefined) return text;
  switch (kind) {
    case "int":
    case "number": {
      const t = text.trim();
      // The exclusion thresholds can be turned off, as `null` does in a file.
      if (OFF_PATHS.has(path) && OFF_WORDS.has(t.toLowerCase())) return null;
      // Plain decimal only: `Number` would also read "0x50" as 80 and "0b1" as 1.
      return DECIMAL.test(t) ? Number(t) : text;
    }
    case "optional-string":
      return text === "" ? null : text;
    case "bool": {
      const t = text.trim().toLowerCase();
      return t === "true" || t === "1" ? true : t === "false" || t === "0" ? false : text;
    }
    case "string":
    case "enum":
      return text;
  }
}

/** Parse `kvrouter serve` arguments; unknown flags and missing values are issues. */
export function parseArgs(argv: readonly string[]): { args: ParsedArgs; issues: ConfigIssue[] } {
  const issues: ConfigIssue[] = [];
  const overrides: Override[] = [];
  let configFile: string | null = null;
  let help = false;
  let check = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const eq = arg.startsWith("--") ? arg.indexOf("=") : -1;
    const flag = eq > 0 ? arg.slice(0, eq) : arg;
    const takeValue = (): string | null => {
      if (eq > 0) return arg.slice(eq + 1);
      const next = argv[i + 1];
      if (next === undefined) {
        issues.push({ key: flag, message: "needs a value" });
        return null;
      }
      i++;
      return next;
    };
    if (flag === "-h" || flag === "--help") help = true;
    else if (flag === "--check") check = true;
    else if (flag === "-c" || flag === "--config") configFile = takeValue() ?? configFile;
    else if (flag === "--set") {
      const kv = takeValue();
      if (kv === null) continue;
      const at = kv.indexOf("=");
      const path = at > 0 ? kv.slice(0, at) : "";
      if (!SPECS.has(path)) {
        issues.push({
          key: `--set ${kv}`,
          message: `expected KEY=VALUE with KEY one of ${[...SPECS.keys()].join(", ")}`,
        });
        continue;
      }
      overrides.push({ path, value: coerce(path, kv.slice(at + 1)), origin: `--set ${path}` });
    } else if (flag in FLAG_PATHS) {
      const value = takeValue();
      const path = FLAG_PATHS[flag]!;
      if (value !== null) overrides.push({ path, value: coerce(path, value), origin: flag });
    } else {
      const known = ["--help", "--check", "--config", "--set", ...Object.keys(FLAG_PATHS)];
      issues.push({ key: arg, message: `${unknownKey(flag, known, "option")} (see --help)` });
    }
  }
  return { args: { configFile, help, check, overrides }, issues };
}

/**
 * Read `KVROUTER_*` variables. An unknown `KVROUTER_*` name is probably a typo, but other
 * tools may share the prefix, so it is a warning rather than a start-up failure.
 */
export function readEnv(env: Readonly<Record<string, string | undefined>>): {
  configFile: string | null;
  overrides: Override[];
  issues: ConfigIssue[];
  warnings: string[];
} {
  const issues: ConfigIssue[] = [];
  const warnings: string[] = [];
  const overrides: Override[] = [];
  const byName = new Map([...SPECS.keys()].map((path) => [envNameOfPath(path), path]));
  let configFile: string | null = null;
  for (const [name, text] of Object.entries(env)) {
    if (!name.startsWith("KVROUTER_") || text === undefined) continue;
    if (name === "KVROUTER_CONFIG") {
      configFile = text === "" ? null : text;
    } else if (name === "KVROUTER_WORKERS") {
      try {
        overrides.push({ path: "workers", value: JSON.parse(text), origin: name });
      } catch (err) {
        issues.push({ key: name, message: `must be a JSON list of workers: ${String(err)}` });
      }
    } else {
      const path = byName.get(name);
      if (path === undefined) {
        const guess = closest(name, [...byName.keys(), "KVROUTER_CONFIG", "KVROUTER_WORKERS"]);
        const hint = guess === null ? "" : `; did you mean ${guess}?`;
        warnings.push(`ignoring unknown environment variable ${name}${hint}`);
      } else overrides.push({ path, value: coerce(path, text), origin: name });
    }
  }
  return { configFile, overrides, issues, warnings };
}
