/**
 * Builds the one configuration `kvrouter serve` runs with: defaults < file < environment
 * < flags, validated once (all problems reported together), then frozen. With no
 * `--config` and no `KVROUTER_CONFIG`, the embedded `config/default.yaml` is used.
 */

import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { parse as parseYaml } from "yaml";
import { type ConfigIssue, isPlainObject } from "./issues.js";
import { type Override, parseArgs, readEnv, USAGE } from "./sources.js";
import type { KvrouterConfig } from "./types.js";
import { validateConfig } from "./validate.js";

/** `config/default.yaml` at the package root; same relative place from `src/` and `dist/`. */
export const DEFAULT_CONFIG_FILE = fileURLToPath(
  new URL("../../config/default.yaml", import.meta.url),
);

export interface LoadConfigOptions {
  readonly argv: readonly string[];
  readonly env: Readonly<Record<string, string | undefined>>;
  /** File used when neither `--config` nor `KVROUTER_CONFIG` names one; null = none. */
  readonly defaultFile?: string | null;
  readonly readFile?: (path: string) => string;
}

export type LoadConfigOutcome =
  | {
      readonly kind: "ok";
      readonly config: KvrouterConfig;
      /** The file the config came from (null: defaults only). */
      readonly file: string | null;
      readonly check: boolean;
      readonly warnings: readonly string[];
    }
  | { readonly kind: "help"; readonly text: string }
  | { readonly kind: "invalid"; readonly issues: readonly ConfigIssue[] };

/** Parse a YAML (or JSON, a YAML subset) config file into a raw object. */
export function parseConfigText(
  text: string,
  file: string,
): { ok: true; raw: unknown } | { ok: false; issue: ConfigIssue } {
  try {
    return { ok: true, raw: parseYaml(text) ?? {} };
  } catch (err) {
    const message = err instanceof Error ? err.message.split("\n")[0]! : String(err);
    return { ok: false, issue: { key: file, message: `is not valid YAML/JSON: ${message}` } };
  }
}

/** Set a dotted path, creating missing mappings; a non-mapping on the way is left for validation. */
function applyOverride(raw: Record<string, unknown>, o: Override): void {
  const parts = o.path.split(".");
  let target: Record<string, unknown> = raw;
  for (const part of parts.slice(0, -1)) {
    if (target[part] === undefined) target[part] = {};
    const next = target[part];
    if (!isPlainObject(next)) return;
    target = next;
  }
  target[parts[parts.length - 1]!] = o.value;
}

/** Load and validate; never throws for bad input, never reads `process` itself. */
export function loadConfig(options: LoadConfigOptions): LoadConfigOutcome {
  const readFile = options.readFile ?? ((p: string) => readFileSync(p, "utf8"));
  const { args, issues } = parseArgs(options.argv);
  if (args.help) return { kind: "help", text: USAGE };
  const env = readEnv(options.env);
  issues.push(...env.issues);
  const file =
    args.configFile ??
    env.configFile ??
    (options.defaultFile === undefined ? DEFAULT_CONFIG_FILE : options.defaultFile);
  let raw: unknown = {};
  if (file !== null) {
    let text: string | null = null;
    try {
      text = readFile(file);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? String(err);
      issues.push({ key: file, message: `cannot read config file (${code})` });
    }
    if (text !== null) {
      const parsed = parseConfigText(text, file);
      if (parsed.ok) raw = parsed.raw;
      else issues.push(parsed.issue);
    }
  }
  if (issues.length > 0) return { kind: "invalid", issues };
  if (!isPlainObject(raw)) {
    return { kind: "invalid", issues: [{ key: file ?? "(config)", message: "must be a mapping" }] };
  }
  const merged: Record<string, unknown> = structuredClone(raw);
  const origins = new Map<string, string>();
  for (const o of [...env.overrides, ...args.overrides]) {
    applyOverride(merged, o);
    origins.set(o.path, o.origin);
  }
  const result = validateConfig(merged, origins);
  if (!result.ok) return { kind: "invalid", issues: result.issues };
  return { kind: "ok", config: result.config, file, check: args.check, warnings: env.warnings };
}

/** A copy safe to print or log: the tokens and the worker API key are masked. */
export function redactConfig(config: KvrouterConfig): KvrouterConfig {
  const mask = (t: string | null) => (t === null ? null : "***");
  return {
    ...config,
    server: {
      ...config.server,
      authToken: mask(config.server.authToken),
      decisionToken: mask(config.server.decisionToken),
    },
    gateway: {
      ...config.gateway,
      authToken: mask(config.gateway.authToken),
      workerApiKey: mask(config.gateway.workerApiKey),
    },
  };
}
