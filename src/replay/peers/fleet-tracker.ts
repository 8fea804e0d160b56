/**
 * What a peer router counts for itself, without asking the engines: requests it routed
 * that have not finished (SGLang's `load()`, AIBrix's running-request count), requests
 * still in prefill, and arrivals per worker over a sliding window (production-stack's
 * QPS). Fed by the replay's routing decisions and first-token / done reports.
 */

/** Per-worker request bookkeeping of a router that tracks its own traffic. */
export class FleetTracker {
  readonly #outstanding: Int32Array;
  readonly #prefilling: Int32Array;
  /** Arrival times per worker, oldest first, for the sliding QPS window. */
  readonly #arrivals: number[][];
  readonly #heads: Int32Array;
  readonly #workerOf = new Map<number, number>();
  readonly #inPrefill = new Set<number>();

  constructor(
    readonly size: number,
    /** Sliding window of the per-worker request rate, ms. */
    readonly qpsWindowMs = 60_000,
  ) {
    this.#outstanding = new Int32Array(size);
    this.#prefilling = new Int32Array(size);
    this.#arrivals = Array.from({ length: size }, () => []);
    this.#heads = new Int32Array(size);
  }

  /** Requests routed to `w` and not yet done. */
  outstanding(w: number): number {
    return this.#outstanding[w]!;
  }

  /** Requests routed to `w` whose first token has not come back. */
  prefilling(w: number): number {
    return this.#prefilling[w]!;
  }

  /** Requests routed to `w` per second over the last window ending at `nowMs`. */
  qps(w: number, nowMs: number): number {
    const list = this.#arrivals[w]!;
    let head = this.#heads[w]!;
    while (head < list.length && list[head]! <= nowMs - this.qpsWindowMs) head++;
    if (head > 1024 && head * 2 > list.length) {
      list.splice(0, head);
      head = 0;
    }
    this.#heads[w] = head;
    return (list.length - head) / (this.qpsWindowMs / 1000);
  }

  /** Whether `w` has been sent anything yet (production-stack routes to unseen engines first). */
  seen(w: number): boolean {
    return this.#arrivals[w]!.length > 0;
  }

  routed(request: number, w: number, nowMs: number): void {
    this.#workerOf.set(request, w);
    this.#inPrefill.add(request);
    this.#outstanding[w]!++;
    this.#prefilling[w]!++;
    this.#arrivals[w]!.push(nowMs);
  }

  firstToken(request: number): void {
    const w = this.#workerOf.get(request);
    if (w === undefined || !this.#inPrefill.delete(request)) return;
    this.#prefilling[w]!--;
  }

  done(request: number): void {
    const w = this.#workerOf.get(request);
    if (w === undefined) return;
    this.#workerOf.delete(request);
    if (this.#inPrefill.delete(request)) this.#prefilling[w]!--;
    this.#outstanding[w]!--;
  }
}
