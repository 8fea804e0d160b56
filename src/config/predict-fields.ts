/**
 * The `predict` section's settings: predict-on-route and the degraded-mode fallback
 * (`docs/prediction.md`). Kept beside `fields.ts`, which includes it.
 */

const DAY_MS = 86_400_000;

export const PREDICT_FIELDS = {
  ttlMs: {
    kind: "int",
    min: 0,
    max: DAY_MS,
    default: 2000,
    doc: "predict-on-route: a routed prompt's blocks count as held by its worker this long, or until the engine reports them (0 = off; docs/prediction.md)",
  },
  maxBlocksPerWorker: {
    kind: "int",
    min: 0,
    max: 100_000_000,
    default: 200_000,
    doc: "most predicted blocks kept per worker; the oldest go (counted) past it",
  },
  fallback: {
    kind: "bool",
    default: true,
    doc: "route a worker whose event stream broke (unfilled gap, silence while serving, decode errors) by its routed requests until the stream is healthy",
  },
  degradedTtlMs: {
    kind: "int",
    min: 1,
    max: DAY_MS,
    default: 600_000,
    doc: "how long a routed prompt counts as held by a degraded worker (its KV capacity caps the count)",
  },
  silentAfterMs: {
    kind: "int",
    min: 1,
    max: DAY_MS,
    default: 30_000,
    doc: "a worker sent requests whose stream stays silent this long is degraded",
  },
  recoverAfterMs: {
    kind: "int",
    min: 1,
    max: DAY_MS,
    default: 30_000,
    doc: "a degraded worker's stream must look healthy this long before precise routing resumes",
  },
} as const;
