/**
 * kvrouter's configuration: one typed, validated, frozen object, built once at start-up
 * from defaults, a YAML/JSON file, `KVROUTER_*` environment variables and flags. The
 * implementation lives in `src/config/`; this module is the public face.
 */

export { envNameOf, FIELDS } from "./fields.js";
export { type ConfigIssue, formatIssues } from "./issues.js";
export {
  DEFAULT_CONFIG_FILE,
  type LoadConfigOptions,
  type LoadConfigOutcome,
  loadConfig,
  redactConfig,
} from "./load-config.js";
export { USAGE } from "./sources.js";
export { parseTokenizerSpecs, type TokenizerSpec } from "./tokenizer-specs.js";
export * from "./types.js";
export { validateConfig } from "./validate.js";
export { validateWorker, WORKER_KEYS } from "./worker-config.js";
