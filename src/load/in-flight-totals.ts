/**
 * Running sums of in-flight requests per worker (`InFlightTotals`), kept by adding and
 * removing one request at a time. Shared by this router's own bookkeeping
 * (`in-flight.ts`) and the other replicas' requests (`replicas/remote-load-book.ts`).
 */

import type { InFlightTotals } from "./types.js";

/** Totals of no request at all (frozen; returned for workers with nothing in flight). */
export const ZERO_TOTALS: InFlightTotals = Object.freeze({
  pendingPrefillTokens: 0,
  pendingRequests: 0,
  activeBlocks: 0,
  activeRequests: 0,
});

export class RunningTotals implements InFlightTotals {
  pendingPrefillTokens = 0;
  pendingRequests = 0;
  activeBlocks = 0;
  activeRequests = 0;

  /**
   * Add (`sign` 1) or take away (−1) one request holding `blocks` KV blocks; a request
   * still `pending` its first token also counts its uncached `prefillTokens`.
   */
  add(pending: boolean, prefillTokens: number, blocks: number, sign: 1 | -1): void {
    if (pending) {
      this.pendingPrefillTokens += sign * prefillTokens;
      this.pendingRequests += sign;
    }
    this.activeBlocks += sign * blocks;
    this.activeRequests += sign;
  }

  /** A counted request produced its first token: its prefill no longer loads the worker. */
  endPrefill(prefillTokens: number): void {
    this.pendingPrefillTokens -= prefillTokens;
    this.pendingRequests--;
  }

  /** This = a − b. */
  difference(a: InFlightTotals, b: InFlightTotals): this {
    this.pendingPrefillTokens = a.pendingPrefillTokens - b.pendingPrefillTokens;
    this.pendingRequests = a.pendingRequests - b.pendingRequests;
    this.activeBlocks = a.activeBlocks - b.activeBlocks;
    this.activeRequests = a.activeRequests - b.activeRequests;
    return this;
  }
}
