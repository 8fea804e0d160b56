/**
 * Remote load book benchmark (`npx tsx bench/remote-load-book-bench.ts`): the cost of
 * one route's read of the other replicas' in-flight totals (`totalsSince`) while peers
 * hold N unreported requests on a worker and the scrape time moves every 50 routes.
 * Each route also adds one peer entry and ends another (steady state). The read must
 * not grow with N: it moves a time-ordered cursor instead of rescanning.
 * Prints one line per N, then one JSON line.
 */

import { performance } from "node:perf_hooks";
import type { WorkerKey } from "../src/protocol/worker.js";
import { RemoteLoadBook } from "../src/replicas/remote-load-book.js";
import type { SharedEntry } from "../src/replicas/wire.js";

const W = "w0#0" as WorkerKey;
const ROUTES = 20_000;
const entry = (id: string, t: number): SharedEntry => ({
  id,
  worker: W,
  prefillTokens: 10,
  blocks: 2,
  addedMs: t,
  prefillEndMs: 1e12,
  expiresMs: 1e12,
  pending: true,
});

function run(n: number): number {
  const b = new RemoteLoadBook({ staleAfterMs: 1e9 });
  for (let i = 0; i < n; i++) b.add("a", entry(`r${i}`, i), i);
  let since = 0;
  let t = n;
  const t0 = performance.now();
  for (let k = 0; k < ROUTES; k++) {
    if (k % 50 === 0) since = t - 10;
    b.add("a", entry(`x${k}`, t), t);
    b.done("a", `r${k}`, t);
    b.totalsSince(W, since);
    t++;
  }
  return ((performance.now() - t0) * 1000) / ROUTES;
}

const out: Record<string, number> = {};
for (const n of [1_000, 10_000, 100_000]) run(n); // warm-up
for (const n of [1_000, 10_000, 100_000]) {
  const us = run(n);
  out[`us_per_route_${n}`] = Number(us.toFixed(2));
  console.log(`${n.toLocaleString("en")} peer entries: ${us.toFixed(2)} µs per route`);
}
console.log(JSON.stringify(out));
