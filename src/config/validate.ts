/**
 * Validation of a raw (parsed, merged) configuration object into a typed one. It collects
 * every problem instead of stopping at the first, and each problem names the key, where
 * the value came from, and the bad value, so a broken config is fixed in one pass.
 */

import { checkSchedulerConfig } from "../scheduler/config.js";
import type { SchedulerConfig } from "../scheduler/types.js";
import { FIELDS, type FieldSpec, fieldPaths, type SectionName } from "./fields.js";
import { type ConfigIssue, isPlainObject, show, unknownKey } from "./issues.js";
import { parseTokenizerSpecs } from "./tokenizer-specs.js";
import type { KvrouterConfig, ReplicasConfig, WorkerConfig } from "./types.js";
import { isHttpUrl, validateWorker } from "./worker-config.js";

export type ValidationResult =
  | { readonly ok: true; readonly config: KvrouterConfig }
  | { readonly ok: false; readonly issues: readonly ConfigIssue[] };

/** Where a value came from, for messages: path → "KVROUTER_SERVER_PORT", "--port", … */
export type Origins = ReadonlyMap<string, string>;

/** Check one scalar against its spec; returns the typed value or a message. */
export function checkField(
  spec: FieldSpec,
  value: unknown,
): { ok: true; value: unknown } | { ok: false; message: string } {
  switch (spec.kind) {
    case "int":
    case "number": {
      const okType =
        typeof value === "number" &&
        Number.isFinite(value) &&
        (spec.kind === "number" || Number.isInteger(value));
      if (!okType || value < spec.min || value > spec.max) {
        const what = spec.kind === "int" ? "an integer" : "a number";
        return { ok: false, message: `must be ${what} in [${spec.min}, ${spec.max}]` };
      }
      return { ok: true, value };
    }
    case "bool":
      if (typeof value !== "boolean") return { ok: false, message: "must be true or false" };
      return { ok: true, value };
    case "string":
      if (typeof value !== "string") return { ok: false, message: "must be a string" };
      return { ok: true, value };
    case "optional-string":
      if (value === null) return { ok: true, value: null };
      if (typeof value !== "string" || value === "") {
        return { ok: false, message: "must be a non-empty string or null" };
      }
      return { ok: true, value };
    case "enum":
      if (typeof value !== "string" || !spec.values.includes(value)) {
        return { ok: false, message: `must be one of ${spec.values.join(", ")}` };
      }
      return { ok: true, value };
  }
}

/** Validate a merged raw object (file + env + flags) against the schema. */
export function validateConfig(raw: unknown, origins: Origins = new Map()): ValidationResult {
  const issues: ConfigIssue[] = [];
  const at = (key: string) => {
    const origin = origins.get(key.startsWith("workers") ? "workers" : key);
    return origin === undefined ? key : `${key} (from ${origin})`;
  };
  const root = raw ?? {};
  if (!isPlainObject(root)) {
    return {
      ok: false,
      issues: [{ key: "(root)", message: `must be a mapping, got ${show(raw)}` }],
    };
  }
  for (const name of Object.keys(root)) {
    if (!(name in FIELDS) && name !== "workers" && name !== "scheduler") {
      issues.push({
        key: name,
        message: unknownKey(name, [...Object.keys(FIELDS), "workers", "scheduler"]),
      });
    }
  }
  const out: Record<string, Record<string, unknown>> = {};
  for (const section of Object.keys(FIELDS) as SectionName[]) {
    const given = root[section];
    out[section] = {};
    if (given !== undefined && !isPlainObject(given)) {
      issues.push({ key: section, message: `must be a mapping, got ${show(given)}` });
      continue;
    }
    for (const key of Object.keys(given ?? {})) {
      if (!(key in FIELDS[section]))
        issues.push({
          key: `${section}.${key}`,
          message: unknownKey(key, Object.keys(FIELDS[section])),
        });
    }
  }
  const failed = new Set<string>();
  for (const { section, key, spec } of fieldPaths()) {
    const given = root[section];
    const value = isPlainObject(given) && key in given ? given[key] : spec.default;
    const result = checkField(spec, value);
    const path = `${section}.${key}`;
    if (result.ok) out[section]![key] = result.value;
    else {
      failed.add(path);
      issues.push({ key: at(path), message: `${result.message}, got ${show(value)}` });
    }
  }
  const scheduler = validateScheduler(root.scheduler, at, issues);
  const workers: WorkerConfig[] = [];
  const rawWorkers = root.workers ?? [];
  const blockSize = out.index!.blockSize as number;
  if (!Array.isArray(rawWorkers)) {
    issues.push({ key: at("workers"), message: `must be a list, got ${show(rawWorkers)}` });
  } else {
    const seen = new Set<string>();
    rawWorkers.forEach((w, i) => {
      const r = validateWorker(w, `workers[${i}]`, blockSize);
      if (!r.ok) {
        for (const issue of r.issues) issues.push({ ...issue, key: at(issue.key) });
        return;
      }
      if (seen.has(r.worker.id)) {
        issues.push({ key: at(`workers[${i}].id`), message: `duplicate id ${show(r.worker.id)}` });
      }
      seen.add(r.worker.id);
      workers.push(r.worker);
    });
  }
  // Cross-field rules, checked whenever both of their own fields are valid.
  const valid = (...paths: string[]) => paths.every((p) => !failed.has(p));
  const load = out.load as { scrapeIntervalMs: number; scrapeTimeoutMs: number };
  if (
    valid("load.scrapeTimeoutMs", "load.scrapeIntervalMs") &&
    load.scrapeTimeoutMs > load.scrapeIntervalMs
  ) {
    issues.push({
      key: at("load.scrapeTimeoutMs"),
      message: `must not exceed load.scrapeIntervalMs (${load.scrapeIntervalMs}), got ${load.scrapeTimeoutMs}`,
    });
  }
  // A worker that answers every scrape must never be stale between two of them: its last
  // success is up to an interval plus a scrape's duration old when the next one lands.
  const stale = (out.load as { staleAfterMs: number }).staleAfterMs;
  if (
    valid("load.staleAfterMs", "load.scrapeIntervalMs", "load.scrapeTimeoutMs") &&
    stale <= load.scrapeIntervalMs + load.scrapeTimeoutMs
  ) {
    issues.push({
      key: at("load.staleAfterMs"),
      message: `must exceed load.scrapeIntervalMs + load.scrapeTimeoutMs (${load.scrapeIntervalMs + load.scrapeTimeoutMs}), got ${stale}: a worker answering every scrape would go stale between two`,
    });
  }
  const inFlight = out.inFlight as { prefillTtlMs: number; ttlMs: number };
  if (valid("inFlight.prefillTtlMs", "inFlight.ttlMs") && inFlight.prefillTtlMs > inFlight.ttlMs) {
    issues.push({
      key: at("inFlight.prefillTtlMs"),
      message: `must not exceed inFlight.ttlMs (${inFlight.ttlMs}), got ${inFlight.prefillTtlMs}`,
    });
  }
  const timeouts = out.server as { headersTimeoutMs: number; requestTimeoutMs: number };
  if (
    valid("server.headersTimeoutMs", "server.requestTimeoutMs") &&
    timeouts.requestTimeoutMs > 0 &&
    timeouts.headersTimeoutMs > timeouts.requestTimeoutMs
  ) {
    issues.push({
      key: at("server.headersTimeoutMs"),
      message: `must not exceed server.requestTimeoutMs (${timeouts.requestTimeoutMs}), got ${timeouts.headersTimeoutMs}`,
    });
  }
  const server = out.server as { host: string; authToken: string | null };
  const allow = out.server!.allowUnauthenticated === true;
  if (
    valid("server.host", "server.authToken") &&
    server.authToken === null &&
    !allow &&
    !isLoopbackHost(server.host)
  ) {
    issues.push({
      key: at("server.authToken"),
      message:
        `is not set but server.host is ${show(server.host)}, which is not a loopback address: ` +
        "anyone who reaches the port could add or delete workers and push fake load. Set " +
        "server.authToken (KVROUTER_SERVER_AUTH_TOKEN), or listen on 127.0.0.1, or set " +
        "server.allowUnauthenticated: true if the network in front of the router is trusted",
    });
  }
  checkReplicas(out.replicas as unknown as ReplicasConfig, valid, at, issues);
  const peer = (out.snapshot as { fromPeer: string | null }).fromPeer;
  if (valid("snapshot.fromPeer") && peer !== null && !isHttpUrl(peer)) {
    issues.push({
      key: at("snapshot.fromPeer"),
      message: `must be an http:// or https:// URL of another kvrouter, got ${show(peer)}`,
    });
  }
  const specs = valid("gateway.tokenizers")
    ? parseTokenizerSpecs(out.gateway!.tokenizers as string | null)
    : [];
  if (typeof specs === "string") issues.push({ key: at("gateway.tokenizers"), message: specs });
  if (issues.length > 0) return { ok: false, issues };
  const config = { ...out, scheduler, workers } as unknown as KvrouterConfig;
  return { ok: true, config: deepFreeze(config) };
}

/** Cross-field rules of the `replicas` section. */
function checkReplicas(
  r: ReplicasConfig,
  valid: (...paths: string[]) => boolean,
  at: (key: string) => string,
  issues: ConfigIssue[],
): void {
  if (
    valid("replicas.redisUrl") &&
    r.redisUrl !== null &&
    !/^rediss?:\/\/[^\s]+$/.test(r.redisUrl)
  ) {
    issues.push({
      key: at("replicas.redisUrl"),
      message: `must be a redis:// or rediss:// URL, got ${show(r.redisUrl)}`,
    });
  }
  for (const key of ["id", "keyPrefix"] as const) {
    const v = r[key];
    if (valid(`replicas.${key}`) && v !== null && !/^[A-Za-z0-9._:-]{1,128}$/.test(v)) {
      issues.push({
        key: at(`replicas.${key}`),
        message: `must be 1-128 of A-Z a-z 0-9 . _ : -, got ${show(v)}`,
      });
    }
  }
  if (
    valid("replicas.heartbeatMs", "replicas.staleAfterMs") &&
    r.heartbeatMs * 2 > r.staleAfterMs
  ) {
    issues.push({
      key: at("replicas.heartbeatMs"),
      message: `must be at most half of replicas.staleAfterMs (${r.staleAfterMs}), got ${r.heartbeatMs}`,
    });
  }
}

const SCHEDULER_KEYS = new Set([
  "temperature",
  "outlierStdK",
  "kvHardCap",
  "stalePolicy",
  "stalePenalty",
  "weights",
]);
const WEIGHT_KEYS = new Set(["prefill", "pending", "decode", "queue", "host", "disk", "store"]);

/**
 * The scheduler section is checked by the scheduler's own rules (its defaults live
 * there), every problem at once; this adds unknown-key checks and reads null as "off"
 * (Infinity) for the two exclusion thresholds, since JSON has no Infinity. Any other
 * null is an error, as in the other sections.
 */
function validateScheduler(
  given: unknown,
  at: (key: string) => string,
  issues: ConfigIssue[],
): SchedulerConfig | null {
  const raw = given === undefined ? {} : given;
  if (!isPlainObject(raw)) {
    issues.push({ key: at("scheduler"), message: `must be a mapping, got ${show(given)}` });
    return null;
  }
  const before = issues.length;
  for (const k of Object.keys(raw)) {
    if (!SCHEDULER_KEYS.has(k)) {
      issues.push({ key: `scheduler.${k}`, message: unknownKey(k, SCHEDULER_KEYS) });
    }
  }
  let weights = raw.weights === undefined ? {} : raw.weights;
  if (!isPlainObject(weights)) {
    issues.push({
      key: at("scheduler.weights"),
      message: `must be a mapping, got ${show(weights)}`,
    });
    weights = {};
  }
  for (const k of Object.keys(weights)) {
    if (!WEIGHT_KEYS.has(k)) {
      issues.push({ key: `scheduler.weights.${k}`, message: unknownKey(k, WEIGHT_KEYS) });
    }
  }
  const input: Record<string, unknown> = { ...raw, weights };
  for (const k of ["outlierStdK", "kvHardCap"]) if (input[k] === null) input[k] = Infinity;
  const result = checkSchedulerConfig(input);
  if (!result.ok) {
    for (const err of result.errors) {
      const key = `scheduler.${err.key}`;
      issues.push({ key: at(key), message: err.message.replace(`${err.key} `, "") });
    }
    return null;
  }
  return issues.length === before ? result.config : null;
}

/**
 * Whether `host` only accepts connections from this machine: `localhost`, 127.0.0.0/8,
 * `::1` (and its IPv4-mapped forms). Anything else, hostnames included, is treated as
 * reachable from the network.
 */
export function isLoopbackHost(host: string): boolean {
  const h = host
    .trim()
    .toLowerCase()
    .replace(/^\[|\]$/g, "");
  if (h === "localhost" || h === "::1" || h === "0:0:0:0:0:0:0:1") return true;
  const v4 = h.startsWith("::ffff:") ? h.slice(7) : h;
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(v4);
}

/** Freeze an object graph so nobody mutates the config after start-up. */
export function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}
