/**
 * Replica load-sync benchmark (`npm run bench:replicas`): how soon replica B knows of a
 * request replica A routed, through a real `redis-server` on loopback. A's tracker
 * listener (`RedisLoadSync.added`, what the router calls on every decision) is called at
 * a fixed rate; B's `onRemoteOp` hook fires when B has applied it to its book. Latency =
 * B applied − A decided (one process, one clock, two Redis connections each). Each
 * request is reported done 20 ms later, so done messages share the channel too.
 * Prints a table per rate, then one JSON line (p50/p99 at each rate).
 *
 * Options (env): REDIS_URL (use a running server instead of starting one),
 * REPLICA_BENCH_SECONDS (per rate, default 3), REPLICA_BENCH_RATES (default 200,2000,10000).
 */

import { performance } from "node:perf_hooks";
import type { WorkerKey } from "../src/protocol/worker.js";
import { RedisLoadSync } from "../src/replicas/redis-load-sync.js";
import { RemoteLoadBook } from "../src/replicas/remote-load-book.js";
import { noopLogger } from "../src/util/log-sink.js";
import { RedisProcess } from "../test/redis-helpers.js";

const SECONDS = Number(process.env.REPLICA_BENCH_SECONDS ?? 3);
const RATES = (process.env.REPLICA_BENCH_RATES ?? "200,2000,10000").split(",").map(Number);

const server = process.env.REDIS_URL === undefined ? await RedisProcess.start() : null;
const url = process.env.REDIS_URL ?? server!.url;

const decidedAt = new Map<string, number>();
const latencies: number[] = [];
const mk = (
  id: string,
  onRemoteOp?: (r: string, op: { op: string; entry?: { id: string } }) => void,
) =>
  new RedisLoadSync({
    url,
    replicaId: id,
    keyPrefix: `bench${process.pid}`,
    heartbeatMs: 500,
    staleAfterMs: 3000,
    commandTimeoutMs: 500,
    maxPendingFlushes: 64,
    book: new RemoteLoadBook({ staleAfterMs: 3000 }),
    nowMs: Date.now,
    logger: noopLogger,
    ...(onRemoteOp === undefined ? {} : { onRemoteOp }),
  });
const a = mk("a");
const b = mk("b", (_r, op) => {
  if (op.op !== "add" || op.entry === undefined) return;
  const t0 = decidedAt.get(op.entry.id);
  if (t0 === undefined) return;
  decidedAt.delete(op.entry.id);
  latencies.push(performance.now() - t0);
});
a.start();
b.start();
for (let i = 0; i < 200 && (a.state !== "synced" || b.state !== "synced"); i++) {
  await new Promise((r) => setTimeout(r, 25));
}

const pct = (s: number[], p: number) => s[Math.min(s.length - 1, Math.floor(p * s.length))]!;
const rows: {
  rate: number;
  sent: number;
  seen: number;
  p50_ms: number;
  p99_ms: number;
  max_ms: number;
}[] = [];
let n = 0;
for (const rate of RATES) {
  latencies.length = 0;
  decidedAt.clear();
  const total = Math.round(rate * SECONDS);
  const start = performance.now();
  let sent = 0;
  // Send in 1 ms ticks (what a busy router's decisions look like in time).
  while (sent < total) {
    const due = Math.min(total, Math.floor(((performance.now() - start) / 1000) * rate) + 1);
    for (; sent < due; sent++) {
      const id = `r${n++}`;
      const now = Date.now();
      decidedAt.set(id, performance.now());
      a.added({
        id,
        worker: `w${n % 64}#0` as WorkerKey,
        prefillTokens: 512,
        blocks: 64,
        addedMs: now,
        prefillEndMs: now + 60_000,
        expiresMs: now + 600_000,
        pending: true,
      });
      setTimeout(() => a.done(id), 20);
    }
    await new Promise((r) => setTimeout(r, 1));
  }
  await new Promise((r) => setTimeout(r, 300));
  const s = [...latencies].sort((x, y) => x - y);
  const row = {
    rate,
    sent: total,
    seen: s.length,
    p50_ms: +pct(s, 0.5).toFixed(3),
    p99_ms: +pct(s, 0.99).toFixed(3),
    max_ms: +s[s.length - 1]!.toFixed(3),
  };
  rows.push(row);
  console.log(
    `rate ${String(rate).padStart(6)}/s  sent ${row.sent}  seen ${row.seen}  p50 ${row.p50_ms} ms  p99 ${row.p99_ms} ms  max ${row.max_ms} ms`,
  );
}
const status = a.status();
await a.close();
await b.close();
await server?.kill();
console.log(
  JSON.stringify({
    bench: "replica-sync",
    seconds_per_rate: SECONDS,
    dropped_ops: status.droppedOps,
    rates: rows,
    p50_ms: rows[0]!.p50_ms,
    p99_ms: rows[0]!.p99_ms,
  }),
);
