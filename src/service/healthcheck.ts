/**
 * `kvrouter healthcheck`: exit 0 when the router's `/healthz` answers 2xx, 1 otherwise.
 * The image's HEALTHCHECK runs it, so the port comes from the same configuration the
 * router reads (file, `KVROUTER_*`, the same flags), not from a number baked into the
 * Dockerfile. `HEALTHCHECK_URL`, when set, is checked instead (simulated-worker
 * containers point it at their `/health`).
 */

import { formatIssues, loadConfig } from "../config/index.js";

const TIMEOUT_MS = 2500;

/** The URL to probe: wildcard listen addresses are reached on loopback. */
export function healthUrl(host: string, port: number): string {
  const h = host === "0.0.0.0" || host === "" ? "127.0.0.1" : host === "::" ? "[::1]" : host;
  return `http://${h.includes(":") && !h.startsWith("[") ? `[${h}]` : h}:${port}/healthz`;
}

export async function main(argv: string[]): Promise<number> {
  let url = process.env.HEALTHCHECK_URL;
  if (url === undefined || url === "") {
    const outcome = loadConfig({ argv, env: process.env });
    if (outcome.kind === "help") {
      process.stdout.write(
        "usage: kvrouter healthcheck [serve's options]\n\nexit 0 when GET /healthz of the configured router answers 2xx (HEALTHCHECK_URL overrides)\n",
      );
      return 0;
    }
    if (outcome.kind === "invalid") {
      process.stderr.write(
        `kvrouter healthcheck: invalid configuration:\n${formatIssues(outcome.issues)}\n`,
      );
      return 1;
    }
    url = healthUrl(outcome.config.server.host, outcome.config.server.port);
  }
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(TIMEOUT_MS) });
    await res.body?.cancel();
    if (res.ok) return 0;
    process.stderr.write(`kvrouter healthcheck: ${url}: HTTP ${res.status}\n`);
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    const why = cause?.code ?? (cause?.message || String(err));
    process.stderr.write(`kvrouter healthcheck: ${url}: ${why}\n`);
  }
  return 1;
}
