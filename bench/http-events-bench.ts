/**
 * `POST /v1/workers/:id/events` over loopback HTTP: how many JSON event batches per
 * second one engine rank can push when it sends one batch at a time (as
 * docs/custom-engines.md asks), and what each costs the router. The service runs in this
 * process (the real one: index, sequencer, apply); the client is `fetch` with keep-alive.
 * Each batch holds `--events` stored events of 4 blocks (block size 16) chained from the
 * root, with hashes as decimal strings (the slow path: JSON numbers would be cheaper).
 * Prints a table, then one JSON line.
 *
 *   npm run bench:http-events [-- --batches 3000 --events 8]
 */

import { loadavg } from "node:os";
import { validateConfig } from "../src/config/index.js";
import { createService } from "../src/service/service.js";
import { createLogger } from "../src/telemetry/logger.js";

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const BATCHES = arg("batches", 3000);
const EVENTS = arg("events", 8);
const WARMUP = Math.min(500, Math.floor(BATCHES / 4));
const BS = 16;
const BLOCKS = 4;

function batch(eventId: number): string {
  const events = Array.from({ length: EVENTS }, (_, e) => {
    const n = eventId * EVENTS + e;
    const base = 1_000_000_007n * BigInt(n + 1);
    return {
      type: "BlockStored",
      block_hashes: Array.from({ length: BLOCKS }, (_, b) => String(base + BigInt(b))),
      parent_block_hash: null,
      token_ids: Array.from({ length: BLOCKS * BS }, (_, t) => (n * 7 + t) % 150_000),
      block_size: BS,
      medium: "GPU",
    };
  });
  return JSON.stringify({ event_id: eventId, events });
}

async function main(): Promise<void> {
  const checked = validateConfig({
    log: { level: "warn" },
    index: { blockSize: BS },
    workers: [{ id: "e0", url: "http://127.0.0.1:1", metricsUrl: null }],
  });
  if (!checked.ok) throw new Error(JSON.stringify(checked.issues));
  const svc = await createService(checked.config, {
    logger: createLogger({ level: "warn" }),
    scrape: false,
  });
  await svc.app.listen({ host: "127.0.0.1", port: 0 });
  const a = svc.app.server.address();
  if (a === null || typeof a === "string") throw new Error("not listening");
  const url = `http://127.0.0.1:${a.port}/v1/workers/e0/events`;
  const bodies = Array.from({ length: BATCHES }, (_, i) => batch(i));
  const bytes = bodies.reduce((s, b) => s + b.length, 0) / BATCHES;
  const times: number[] = [];
  const t0 = performance.now();
  let measuredFrom = t0;
  for (let i = 0; i < BATCHES; i++) {
    if (i === WARMUP) measuredFrom = performance.now();
    const s = performance.now();
    const res = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: bodies[i]!,
    });
    const out = (await res.json()) as { outcome?: string; reset?: string | null };
    if (res.status !== 200 || out.outcome !== "applied" || out.reset !== null) {
      throw new Error(`batch ${i}: ${res.status} ${JSON.stringify(out)}`);
    }
    if (i >= WARMUP) times.push(performance.now() - s);
  }
  const seconds = (performance.now() - measuredFrom) / 1000;
  const state = svc.index.stats();
  await svc.close();
  times.sort((x, y) => x - y);
  const pct = (p: number) => times[Math.min(times.length - 1, Math.floor(p * times.length))]!;
  const measured = BATCHES - WARMUP;
  const result = {
    bench: "http-events",
    batches: measured,
    eventsPerBatch: EVENTS,
    blocksPerEvent: BLOCKS,
    bodyBytes: Math.round(bytes),
    batchesPerS: Math.round(measured / seconds),
    eventsPerS: Math.round((measured * EVENTS) / seconds),
    blocksPerS: Math.round((measured * EVENTS * BLOCKS) / seconds),
    p50Ms: Number(pct(0.5).toFixed(3)),
    p99Ms: Number(pct(0.99).toFixed(3)),
    indexWorkerBlocks: state.workerBlocks,
    loadavg1: Number(loadavg()[0]!.toFixed(2)),
  };
  console.log(`batches measured     ${measured} (after ${WARMUP} warm-up), one in flight`);
  console.log(
    `body                 ${EVENTS} stored events × ${BLOCKS} blocks, ${result.bodyBytes} bytes`,
  );
  console.log(
    `throughput           ${result.batchesPerS} batches/s, ${result.eventsPerS} events/s, ${result.blocksPerS} blocks/s`,
  );
  console.log(`latency per POST     p50 ${result.p50Ms} ms, p99 ${result.p99Ms} ms`);
  console.log(`load average (1 min) ${result.loadavg1}`);
  console.log(JSON.stringify(result));
}

await main();
