/**
 * The set of routable workers (one entry per engine data-parallel rank) and the Mooncake
 * stores whose cached blocks any worker can load. One owner of this state: the HTTP
 * admin routes and `main` add/remove; the router only reads it.
 */

import { type WorkerKey, workerKey } from "../protocol/worker.js";
import type { WorkerInfo, WorkerKind, WorkerSpec } from "./types.js";

const KINDS: readonly WorkerKind[] = ["vllm", "sglang", "mooncake-store"];

/** Thrown for a spec that cannot be registered; `field` names the bad property. */
export class WorkerSpecError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
    this.name = "WorkerSpecError";
  }
}

/** Validate and normalise a spec (throws `WorkerSpecError` naming the field). */
export function normaliseWorkerSpec(spec: WorkerSpec): WorkerInfo {
  if (typeof spec.workerId !== "string" || spec.workerId === "" || spec.workerId.includes("#")) {
    throw new WorkerSpecError("workerId", `workerId must be a non-empty string without '#'`);
  }
  const dpRank = spec.dpRank ?? 0;
  if (!Number.isInteger(dpRank) || dpRank < 0) {
    throw new WorkerSpecError("dpRank", `dpRank must be an integer ≥ 0, got ${spec.dpRank}`);
  }
  if (!KINDS.includes(spec.kind)) {
    throw new WorkerSpecError("kind", `kind must be one of ${KINDS.join(", ")}, got ${spec.kind}`);
  }
  if (!Number.isInteger(spec.blockSize) || spec.blockSize <= 0) {
    throw new WorkerSpecError("blockSize", `blockSize must be an integer > 0`);
  }
  const url = checkUrl("url", spec.url);
  const metricsUrl =
    spec.metricsUrl === null
      ? null
      : spec.metricsUrl === undefined
        ? `${url.replace(/\/+$/, "")}/metrics`
        : checkUrl("metricsUrl", spec.metricsUrl);
  const n = spec.numGpuBlocks ?? null;
  if (n !== null && (!Number.isInteger(n) || n <= 0)) {
    throw new WorkerSpecError("numGpuBlocks", `numGpuBlocks must be an integer > 0 or null`);
  }
  return Object.freeze({
    key: workerKey(spec.workerId, dpRank),
    workerId: spec.workerId,
    dpRank,
    url,
    metricsUrl,
    model: spec.model ?? null,
    kind: spec.kind,
    blockSize: spec.blockSize,
    numGpuBlocks: n,
  });
}

function checkUrl(field: string, value: unknown): string {
  if (typeof value !== "string") throw new WorkerSpecError(field, `${field} must be a string`);
  let parsed: URL;
  try {
    parsed = new URL(value);
  } catch {
    throw new WorkerSpecError(field, `${field} is not a valid URL: ${value}`);
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    throw new WorkerSpecError(field, `${field} must be http(s), got ${parsed.protocol}`);
  }
  return value;
}

/** Registered workers by key. `version` changes on every mutation (cheap cache key). */
export class WorkerRegistry {
  readonly #workers = new Map<WorkerKey, WorkerInfo>();
  #version = 0;
  #routableCache: {
    version: number;
    byModel: Map<string | null, readonly WorkerInfo[]>;
    /** The list for every model no registered worker names (null-model workers only). */
    anyModel: readonly WorkerInfo[] | null;
    /** Models registered engines name (the only non-null cache keys). */
    models: ReadonlySet<string>;
  } = { version: -1, byModel: new Map(), anyModel: null, models: new Set() };

  /** Monotonic mutation counter. */
  get version(): number {
    return this.#version;
  }

  get size(): number {
    return this.#workers.size;
  }

  /** Add or replace a worker rank; returns the normalised entry. Throws `WorkerSpecError`. */
  upsert(spec: WorkerSpec): WorkerInfo {
    const info = normaliseWorkerSpec(spec);
    this.#workers.set(info.key, info);
    this.#version++;
    return info;
  }

  /** Remove one rank; false if it was not registered. */
  remove(key: WorkerKey): boolean {
    const had = this.#workers.delete(key);
    if (had) this.#version++;
    return had;
  }

  /** Remove every rank of a worker id; returns the keys removed. */
  removeWorker(workerId: string): WorkerKey[] {
    const removed: WorkerKey[] = [];
    for (const info of this.#workers.values()) {
      if (info.workerId === workerId) removed.push(info.key);
    }
    for (const key of removed) this.#workers.delete(key);
    if (removed.length > 0) this.#version++;
    return removed;
  }

  get(key: WorkerKey): WorkerInfo | undefined {
    return this.#workers.get(key);
  }

  /** Every entry, stores included, in registration order. */
  list(): WorkerInfo[] {
    return [...this.#workers.values()];
  }

  /**
   * Routing targets (engines, not stores), optionally only those serving `model`
   * (workers with a null model serve any model). Cached until the next mutation, but only
   * for `null` and the models registered workers name: every other model gets one shared
   * list (the any-model workers), so callers naming arbitrary models cannot grow the cache.
   */
  routable(model: string | null = null): readonly WorkerInfo[] {
    const cache = this.#routableCache;
    if (cache.version !== this.#version) {
      cache.version = this.#version;
      cache.byModel.clear();
      cache.anyModel = null;
      cache.models = new Set(this.models());
    }
    let list = cache.byModel.get(model);
    if (list !== undefined) return list;
    const known = model === null || cache.models.has(model);
    if (!known && cache.anyModel !== null) return cache.anyModel;
    list = this.list().filter(
      (w) =>
        w.kind !== "mooncake-store" && (model === null || w.model === null || w.model === model),
    );
    if (known) cache.byModel.set(model, list);
    else cache.anyModel = list;
    return list;
  }

  /** Keys of registered Mooncake stores (the index holds their blocks under these keys). */
  storeKeys(): WorkerKey[] {
    return this.list()
      .filter((w) => w.kind === "mooncake-store")
      .map((w) => w.key);
  }

  /** Distinct models served (null-model workers not included). */
  models(): string[] {
    const set = new Set<string>();
    for (const w of this.#workers.values())
      if (w.model !== null && w.kind !== "mooncake-store") set.add(w.model);
    return [...set].sort();
  }
}
