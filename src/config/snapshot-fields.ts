/**
 * The `snapshot` section's settings: the index snapshot of warm restart, and warm start
 * from a peer replica (`docs/index.md`, "Warm restart"). Kept beside `fields.ts`, which
 * includes it.
 */

const DAY_MS = 86_400_000;

export const SNAPSHOT_FIELDS = {
  path: {
    kind: "optional-string",
    default: null,
    doc: "file the index and stream positions are saved to (periodically and on shutdown) and restored from at start (docs/index.md); unset = off",
  },
  intervalMs: {
    kind: "int",
    min: 1000,
    max: DAY_MS,
    default: 60_000,
    doc: "how often the snapshot is written",
  },
  fromPeer: {
    kind: "optional-string",
    default: null,
    doc: "base URL of another kvrouter (e.g. http://router-a:8080) whose GET /v1/snapshot is fetched at start when no local snapshot loads (server.authToken is sent); unset = off",
  },
  fromPeerTimeoutMs: {
    kind: "int",
    min: 100,
    max: 600_000,
    default: 30_000,
    doc: "how long fetching the peer's snapshot may take before starting cold",
  },
} as const;
