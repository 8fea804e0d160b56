/**
 * Worker identity. An engine with data-parallel size N runs N independent caches, one
 * per rank, each a separate routing target: the identity is (workerId, dpRank).
 */

declare const workerKeyBrand: unique symbol;

/** A worker and one of its data-parallel ranks. */
export interface WorkerIdentity {
  readonly workerId: string;
  readonly dpRank: number;
}

/** The identity as one string (`<workerId>#<dpRank>`), for map keys and metric labels. */
export type WorkerKey = string & { readonly [workerKeyBrand]: true };

export function workerKey(workerId: string, dpRank = 0): WorkerKey {
  return `${workerId}#${dpRank}` as WorkerKey;
}

export function parseWorkerKey(key: WorkerKey): WorkerIdentity {
  const at = key.lastIndexOf("#");
  return { workerId: key.slice(0, at), dpRank: Number(key.slice(at + 1)) };
}
