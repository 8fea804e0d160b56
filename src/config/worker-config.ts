/**
 * Validation of one worker declaration. Shared by the config file and by
 * `POST /v1/workers`, so a worker added at run time obeys exactly the same rules.
 */

import { type ConfigIssue, isPlainObject, show, unknownKey } from "./issues.js";
import { ENGINE_KINDS, type EngineKind, type WorkerConfig } from "./types.js";

const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/;

/** The keys a worker declaration may carry, for "unknown key" messages. */
export const WORKER_KEYS = [
  "id",
  "url",
  "eventsEndpoint",
  "replayEndpoint",
  "topic",
  "dpSize",
  "metricsUrl",
  "kind",
  "model",
  "blockSize",
  "numGpuBlocks",
] as const;

/** Parse `tcp://host:port`; null when it is not one. */
export function parseTcpEndpoint(endpoint: string): { host: string; port: number } | null {
  const m = /^tcp:\/\/(\[[0-9a-fA-F:]+\]|[^:/\s]+):(\d{1,5})$/.exec(endpoint);
  if (m === null) return null;
  const port = Number(m[2]);
  if (port < 1 || port > 65535) return null;
  return { host: m[1]!, port };
}

/** An absolute http(s) URL with a host. */
export function isHttpUrl(s: string): boolean {
  try {
    const u = new URL(s);
    return (u.protocol === "http:" || u.protocol === "https:") && u.host !== "";
  } catch {
    return false;
  }
}

/**
 * Validate one raw worker object. `path` prefixes issue keys (`workers[0]`, `body`).
 * Defaults: topic "", dpSize 1, kind vllm, blockSize = the index's, metricsUrl =
 * `<url>/metrics` unless set to null (none for a mooncake store), endpoints null (no events).
 */
export function validateWorker(
  raw: unknown,
  path: string,
  indexBlockSize: number,
): { ok: true; worker: WorkerConfig } | { ok: false; issues: ConfigIssue[] } {
  if (!isPlainObject(raw)) {
    return { ok: false, issues: [{ key: path, message: `must be a mapping, got ${show(raw)}` }] };
  }
  const issues: ConfigIssue[] = [];
  const bad = (key: string, message: string) =>
    issues.push({ key: `${path}.${key}`, message: `${message}, got ${show(raw[key])}` });
  for (const key of Object.keys(raw)) {
    if (!(WORKER_KEYS as readonly string[]).includes(key)) {
      issues.push({ key: `${path}.${key}`, message: unknownKey(key, WORKER_KEYS) });
    }
  }
  const { id, url, eventsEndpoint, replayEndpoint, model } = raw;
  if (typeof id !== "string" || !ID_PATTERN.test(id)) {
    bad("id", "must be 1-64 characters of letters, digits, '.', '_', ':', '-'");
  }
  const kind = raw.kind ?? "vllm";
  if (typeof kind !== "string" || !(ENGINE_KINDS as readonly string[]).includes(kind)) {
    bad("kind", `must be one of ${ENGINE_KINDS.join(", ")}`);
  }
  if (typeof url !== "string" || !isHttpUrl(url)) bad("url", "must be an http(s) URL");
  const dpSize = raw.dpSize ?? 1;
  if (typeof dpSize !== "number" || !Number.isInteger(dpSize) || dpSize < 1 || dpSize > 1024) {
    bad("dpSize", "must be an integer in [1, 1024]");
  }
  for (const [key, value] of [
    ["eventsEndpoint", eventsEndpoint],
    ["replayEndpoint", replayEndpoint],
  ] as const) {
    if (value === undefined || value === null) continue;
    const tcp = typeof value === "string" ? parseTcpEndpoint(value) : null;
    if (tcp === null) bad(key, "must be tcp://host:port");
    else if (typeof dpSize === "number" && tcp.port + dpSize - 1 > 65535) {
      bad(key, `leaves no room for ${dpSize} ranks (port + rank must be ≤ 65535)`);
    }
  }
  if (replayEndpoint != null && eventsEndpoint == null) {
    bad("replayEndpoint", "needs eventsEndpoint too");
  }
  const topic = raw.topic ?? "";
  if (typeof topic !== "string") bad("topic", "must be a string");
  let metricsUrl = raw.metricsUrl;
  if (metricsUrl === undefined) {
    const scrapable = typeof url === "string" && kind !== "mooncake-store";
    metricsUrl = scrapable ? `${url.replace(/\/+$/, "")}/metrics` : null;
  } else if (metricsUrl !== null && (typeof metricsUrl !== "string" || !isHttpUrl(metricsUrl))) {
    bad("metricsUrl", "must be an http(s) URL or null");
  }
  if (model !== undefined && model !== null && (typeof model !== "string" || model === "")) {
    bad("model", "must be a non-empty string or null");
  }
  const blockSize = raw.blockSize ?? indexBlockSize;
  if (blockSize !== indexBlockSize) {
    bad("blockSize", `must equal index.blockSize (${indexBlockSize})`);
  }
  const numGpuBlocks = raw.numGpuBlocks ?? null;
  if (numGpuBlocks !== null && !(Number.isInteger(numGpuBlocks) && (numGpuBlocks as number) > 0)) {
    bad("numGpuBlocks", "must be a positive integer or null");
  }
  if (issues.length > 0) return { ok: false, issues };
  return {
    ok: true,
    worker: {
      id: id as string,
      url: url as string,
      eventsEndpoint: (eventsEndpoint as string | null | undefined) ?? null,
      replayEndpoint: (replayEndpoint as string | null | undefined) ?? null,
      topic: topic as string,
      dpSize: dpSize as number,
      metricsUrl: metricsUrl as string | null,
      kind: kind as EngineKind,
      model: (model as string | null | undefined) ?? null,
      blockSize: blockSize as number,
      numGpuBlocks: numGpuBlocks as number | null,
    },
  };
}
