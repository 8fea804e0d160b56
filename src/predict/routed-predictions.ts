/**
 * Which prediction each recently routed request made: the worker and the
 * `PredictedBlocks.record` stamp, kept for the predictions' TTL so that a request that
 * never reached its engine (refused, 5xx or 429 before its first byte) can take its
 * prediction back (`PredictedBlocks.withdraw`, with the prompt's keys from its in-flight
 * record: not kept here, so a routed prompt's keys are not held past its prefill). Past
 * the TTL its entries have expired anyway, so nothing older is kept; and at most
 * `maxEntries` at once (the oldest go first), whatever the request rate. Core rules: no
 * I/O, time passed in.
 */

import type { WorkerKey } from "../protocol/worker.js";
import { Fifo } from "../util/fifo.js";

export interface RoutedPrediction {
  readonly requestId: string;
  readonly worker: WorkerKey;
  readonly stamp: number;
  readonly atMs: number;
}

/** Most predictions remembered at once (~100 bytes each). */
export const MAX_ROUTED_PREDICTIONS = 100_000;

export class RoutedPredictions {
  readonly #byId = new Map<string, RoutedPrediction>();
  readonly #order = new Fifo<RoutedPrediction>();
  readonly #ttlMs: number;
  readonly #max: number;

  constructor(ttlMs: number, maxEntries = MAX_ROUTED_PREDICTIONS) {
    this.#ttlMs = ttlMs;
    this.#max = maxEntries;
  }

  /** Remember what `requestId` predicted (a stamp of 0, nothing recorded, is not kept). */
  note(p: RoutedPrediction): void {
    this.#expire(p.atMs);
    if (p.stamp === 0) return;
    this.#byId.set(p.requestId, p);
    this.#order.push(p);
    while (this.#byId.size > this.#max) this.#drop(this.#order.shift()!);
  }

  /** What `requestId` predicted, forgotten here; undefined if unknown or past the TTL. */
  take(requestId: string, nowMs: number): RoutedPrediction | undefined {
    this.#expire(nowMs);
    const p = this.#byId.get(requestId);
    if (p !== undefined) this.#byId.delete(requestId);
    return p;
  }

  get size(): number {
    return this.#byId.size;
  }

  #expire(nowMs: number): void {
    for (let p = this.#order.peek(); p !== undefined; p = this.#order.peek()) {
      if (p.atMs + this.#ttlMs > nowMs) break;
      this.#drop(this.#order.shift()!);
    }
  }

  /** A queued entry leaves the map, unless its id has been routed again since. */
  #drop(p: RoutedPrediction): void {
    if (this.#byId.get(p.requestId) === p) this.#byId.delete(p.requestId);
  }
}
