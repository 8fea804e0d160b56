/**
 * kvrouter's configuration: one typed, validated, frozen object, built once at start-up
 * from defaults, a YAML/JSON file, `KVROUTER_*` environment variables and flags. The
 * implementation lives in `src/config/`; this module is the public face.
 */

export { envNameOf, FIELDS } from "./config/fields.js";
export { type ConfigIssue, formatIssues } from "./config/issues.js";
export {
  DEFAULT_CONFIG_FILE,
  type LoadConfigOptions,
  type LoadConfigOutcome,
  loadConfig,
  redactConfig,
} from "./config/load-config.js";
export { USAGE } from "./config/sources.js";
export * from "./config/types.js";
export { validateConfig } from "./config/validate.js";
export { validateWorker, WORKER_KEYS } from "./config/worker-config.js";
