/** Load: worker registry, load snapshots and staleness, in-flight bookkeeping, metrics parsing. */

export * from "./effective-load.js";
export * from "./fleet-stats.js";
export * from "./in-flight.js";
export * from "./load-tracker.js";
export type * from "./types.js";
export * from "./worker-registry.js";
