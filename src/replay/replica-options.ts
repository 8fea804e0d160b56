/**
 * The replay's replica flags (`--replicas N --replica-sync on|off
 * --replica-sync-p50-ms X --replica-sync-p99-ms Y`), parsed apart from the rest of
 * `options.ts`; the model they drive is `replica-policy.ts`.
 */

import type { ReplicaSyncModel } from "./replica-policy.js";

export const REPLICA_USAGE = `  --replicas N              kv as N router replicas, clients round-robin over them; each
                            has the full index and its own in-flight records (default 1)
  --replica-sync on|off     replicas share in-flight load, as through Redis (default on)
  --replica-sync-p50-ms X   median delay of a shared change reaching another replica
                            (default 1, as measured on loopback Redis)
  --replica-sync-p99-ms X   99th percentile of that delay (default 50; measured 7–139;
                            0 = every change arrives before the next request)
`;

export const REPLICA_FLAGS = {
  replicas: { type: "string" },
  "replica-sync": { type: "string" },
  "replica-sync-p50-ms": { type: "string" },
  "replica-sync-p99-ms": { type: "string" },
} as const;

/** Parses the flags; returns an error message naming the flag, or the model. */
export function parseReplicaFlags(v: {
  readonly replicas?: string;
  readonly "replica-sync"?: string;
  readonly "replica-sync-p50-ms"?: string;
  readonly "replica-sync-p99-ms"?: string;
}): ReplicaSyncModel | string {
  const number = (flag: string, s: string | undefined, fallback: number, int: boolean) => {
    if (s === undefined) return fallback;
    const x = Number(s);
    if (s.trim() === "" || !Number.isFinite(x) || x < 0 || (int && !Number.isSafeInteger(x))) {
      return `--${flag} must be ${int ? "a positive integer" : "a number ≥ 0"}, got '${s}'`;
    }
    return x;
  };
  const replicas = number("replicas", v.replicas, 1, true);
  if (typeof replicas === "string") return replicas;
  if (replicas < 1 || replicas > 64) return `--replicas must be in [1, 64], got '${v.replicas}'`;
  const mode = v["replica-sync"] ?? "on";
  if (mode !== "on" && mode !== "off") return `--replica-sync must be on or off, got '${mode}'`;
  const p99 = number("replica-sync-p99-ms", v["replica-sync-p99-ms"], 50, false);
  if (typeof p99 === "string") return p99;
  // A p99 below the default median alone (0: no delay) brings the median down with it.
  const p50 = number("replica-sync-p50-ms", v["replica-sync-p50-ms"], Math.min(1, p99), false);
  if (typeof p50 === "string") return p50;
  if (p99 < p50) {
    return `--replica-sync-p99-ms (${p99}) must not be below --replica-sync-p50-ms (${p50})`;
  }
  return { replicas, sync: mode === "on", syncP50Ms: p50, syncP99Ms: p99 };
}
