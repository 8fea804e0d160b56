/**
 * Warm restart (`npm run bench:restart`): ~1M blocks over 64 engines (EnginePublishers,
 * real ZeroMQ, each buffering only its last `BUFFER` batches, as a real engine's replay
 * buffer is bounded), then:
 *
 * 1. a router (in this process) ingests them all; a snapshot is written while a 1 ms
 *    ticker and `monitorEventLoopDelay` measure the longest event-loop pause;
 * 2. the router stops (final snapshot); each engine publishes 2 more batches;
 * 3. a cold router process (no snapshot) and then a warm one (the snapshot) start, then,
 *    while the warm one runs, a third with no file and `snapshot.fromPeer` = the warm one
 *    (a new replica); for each: process start → listening, and the share of probes whose
 *    `/v1/match` equals what the engines hold (exact), at listening time and once every
 *    stream is current.
 *
 * Last line: one JSON object (`blocks`, `snapshot_mb`, `snapshot_write_ms`,
 * `max_loop_pause_ms`, `warm_ready_ms`, `cold_exact_ratio`, `warm_exact_ratio`, …; the
 * `*_pause_cpu_ms` keys: the most CPU the process spent between two 1 ms ticks, i.e. the
 * pause on an uncontended core).
 * Env: RESTART_WORKERS (64), RESTART_BATCHES (250 per engine), RESTART_BUFFER (50).
 */

import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { createInterface } from "node:readline";
import { validateConfig } from "../src/config/index.js";
import { EnginePublisher } from "../src/engine/publisher.js";
import type { WireBatch } from "../src/protocol/event-encoder.js";
import { createService } from "../src/service/service.js";
import { createLogger } from "../src/telemetry/logger.js";

const WORKERS = Number(process.env.RESTART_WORKERS ?? 64);
const BATCHES = Number(process.env.RESTART_BATCHES ?? 250);
const BUFFER = Number(process.env.RESTART_BUFFER ?? 50);
const BLOCKS_PER_BATCH = 64;
const BS = 16;
const PROBES = 640;
const root = new URL("..", import.meta.url).pathname;

/** Conversation `k` of engine `e`: 64 blocks of tokens unique to it. */
const tokensOf = (e: number, k: number) =>
  Array.from({ length: BLOCKS_PER_BATCH * BS }, (_, i) => (i === 0 ? 1 + e * 4096 + k : i));
const batch = (e: number, k: number): WireBatch => ({
  ts: k,
  dpRank: null,
  events: [
    {
      type: "BlockStored",
      blockHashes: Array.from(
        { length: BLOCKS_PER_BATCH },
        (_, i) => (BigInt(e) << 40n) | (BigInt(k) << 12n) | BigInt(i),
      ),
      parentHash: null,
      tokenIds: tokensOf(e, k),
      blockSize: BS,
      loraId: null,
      medium: "GPU",
      loraName: null,
    },
  ],
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const dir = mkdtempSync(join(tmpdir(), "kvr-restart-"));
const snapPath = join(dir, "index.snap");

const pubs: EnginePublisher[] = [];
for (let e = 0; e < WORKERS; e++) {
  pubs.push(
    await EnginePublisher.bind({
      endpoint: "tcp://127.0.0.1:*",
      replayEndpoint: "tcp://127.0.0.1:*",
      topic: "kv",
      bufferSteps: BUFFER,
    }),
  );
}
const workers = pubs.map((p, e) => ({
  id: `e${e}`,
  url: `http://127.0.0.1:${30000 + e}`,
  eventsEndpoint: p.endpoint,
  replayEndpoint: p.replayEndpoint,
  topic: "kv",
  metricsUrl: null,
}));
const raw = (snapshot: boolean, fromPeer?: string) => ({
  server: { port: 0, drainMs: 0 },
  index: { blockSize: BS, maxBlocks: 0 },
  gateway: { enabled: false },
  log: { level: "info" },
  events: { replayTimeoutMs: 10_000 },
  snapshot: snapshot
    ? { path: snapPath, intervalMs: 3_600_000 }
    : fromPeer === undefined
      ? {}
      : { fromPeer },
  workers,
});

// 1. Fill a router, then measure one snapshot write.
const v = validateConfig(raw(true));
if (!v.ok) throw new Error(JSON.stringify(v.issues));
const svc = await createService(v.config, {
  logger: createLogger({ level: "warn" }),
  scrape: false,
});
async function streams(): Promise<
  { connected: boolean; current: boolean; resets: Record<string, number> }[]
> {
  const res = await svc.app.inject({ method: "GET", url: "/v1/workers" });
  return (
    res.json() as {
      workers: {
        ranks: {
          stream: { connected: boolean; current: boolean; resets: Record<string, number> };
        }[];
      }[];
    }
  ).workers.map((w) => w.ranks[0]!.stream);
}
while (!(await streams()).every((s) => s.connected && s.current)) await sleep(50);
await sleep(200); // subscriptions travel after the connect (slow joiner)
const total = WORKERS * BATCHES * BLOCKS_PER_BATCH;
const t0 = performance.now();
for (let k = 0; k < BATCHES; k++) {
  for (let e = 0; e < WORKERS; e++) pubs[e]!.publish(batch(e, k));
  await Promise.all(pubs.map((p) => p.flush()));
  // Paced so that no engine's buffer (BUFFER batches) is outrun: the router stays exact.
  const want = (k + 1 - Math.floor(BUFFER / 2)) * WORKERS * BLOCKS_PER_BATCH;
  const since = performance.now();
  while (svc.index.stats().workerBlocks < want) {
    await sleep(5);
    if (performance.now() - since > 60_000) throw new Error(`ingest stalled at batch ${k}`);
  }
}
while (svc.index.stats().workerBlocks < total) {
  await sleep(20);
  if (performance.now() - t0 > 600_000) {
    throw new Error(`ingest stalled at ${svc.index.stats().workerBlocks}`);
  }
}
const resets = (await streams()).reduce(
  (a, s) => a + Object.values(s.resets).reduce((x, y) => x + y, 0),
  0,
);
if (resets > 0) throw new Error(`${resets} stream resets while filling: the index is not exact`);
console.log(`ingested ${total} blocks in ${Math.round(performance.now() - t0)} ms`);

/**
 * One snapshot write, with the longest event-loop pause while it runs: wall clock (a 1 ms
 * ticker and `monitorEventLoopDelay`), and the process CPU time spent inside that longest
 * gap. On a shared machine a pause stretches while other processes hold the core; the
 * CPU figure is the pause this write would cause on a core of its own (the other
 * threads are idle here: ingest is over).
 */
async function measuredWrite() {
  const histogram = monitorEventLoopDelay({ resolution: 1 });
  let maxGap = 0;
  let maxGapCpu = 0;
  let maxCpu = 0;
  let last = performance.now();
  let lastCpu = process.cpuUsage();
  const ticker = setInterval(() => {
    const now = performance.now();
    const cpu = process.cpuUsage();
    const used = (cpu.user - lastCpu.user + cpu.system - lastCpu.system) / 1000;
    if (now - last > maxGap) {
      maxGap = now - last;
      maxGapCpu = used;
    }
    maxCpu = Math.max(maxCpu, used);
    last = now;
    lastCpu = cpu;
  }, 1);
  await sleep(50);
  maxGap = 0;
  maxGapCpu = 0;
  maxCpu = 0;
  histogram.enable();
  const w = await svc.snapshot!.write();
  histogram.disable();
  clearInterval(ticker);
  if (w === null) throw new Error("snapshot write failed");
  const pause = Math.max(maxGap, histogram.max / 1e6);
  console.log(
    `snapshot: ${(w.bytes / 2 ** 20).toFixed(1)} MB in ${w.totalMs.toFixed(0)} ms; capture ${w.captureMs.toFixed(1)} ms, longest chunk ${w.maxChunkMs.toFixed(1)} ms; longest loop pause ${pause.toFixed(1)} ms wall (${maxGapCpu.toFixed(1)} ms CPU in it; most CPU between two ticks ${maxCpu.toFixed(1)} ms)`,
  );
  return { ...w, pause, pauseCpu: maxCpu };
}
const firstWrite = await measuredWrite();
const write = await measuredWrite(); // steady state: the capture buffers exist
const capturesSpoiled = svc.snapshot!.status().spoiledCaptures;
await svc.close(); // the final snapshot

// 2. The engines move on while no router listens.
for (let e = 0; e < WORKERS; e++)
  for (let k = BATCHES; k < BATCHES + 2; k++) pubs[e]!.publish(batch(e, k));
await Promise.all(pubs.map((p) => p.flush()));

// 3. Cold, then warm.
interface Started {
  child: ChildProcess;
  base: string;
  readyMs: number;
}
type Kind = "cold" | "warm" | "peer";
async function startRouter(kind: Kind, peer?: string): Promise<Started> {
  const cfg = join(dir, `${kind}.json`);
  writeFileSync(cfg, JSON.stringify(raw(kind === "warm", peer)));
  const t = Date.now();
  const child = spawn(process.execPath, ["--import", "tsx", "src/cli.ts", "serve", "-c", cfg], {
    cwd: root,
    stdio: ["ignore", "pipe", "inherit"],
  });
  const lines = createInterface({ input: child.stdout! });
  for await (const line of lines) {
    const rec = JSON.parse(line) as { msg?: string; time?: string; address?: { port: number } };
    if (rec.msg?.startsWith("index snapshot")) console.log(`  router: ${rec.msg}`);
    if (rec.msg === "kvrouter listening") {
      lines.on("line", () => {});
      return {
        child,
        base: `http://127.0.0.1:${rec.address!.port}`,
        readyMs: Date.parse(rec.time!) - t,
      };
    }
  }
  throw new Error("router exited before listening");
}

/** Share of probes whose match equals what the engine holds (every engine holds all it stored). */
async function exactRatio(base: string): Promise<number> {
  let exact = 0;
  for (let p = 0; p < PROBES; p++) {
    const e = p % WORKERS;
    const k = (p * 7919) % (BATCHES + 2);
    const res = await fetch(`${base}/v1/match`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ token_ids: tokensOf(e, k) }),
    });
    const m = (await res.json()) as { workers?: { id: string; overlap_blocks: { gpu: number } }[] };
    if (m.workers === undefined) throw new Error(`/v1/match: ${JSON.stringify(m)}`);
    const ok = m.workers.every(
      (w) => w.overlap_blocks.gpu === (w.id === `e${e}` ? BLOCKS_PER_BATCH : 0),
    );
    if (ok) exact++;
  }
  return exact / PROBES;
}

async function allCurrent(base: string): Promise<number> {
  const t = performance.now();
  for (;;) {
    const w = (await (await fetch(`${base}/v1/workers`)).json()) as {
      workers: { ranks: { stream: { current: boolean; last_seq: string | null } }[] }[];
    };
    const done = w.workers.every((x) =>
      x.ranks.every((r) => r.stream.current && r.stream.last_seq === String(BATCHES + 1)),
    );
    if (done) return performance.now() - t;
    if (performance.now() - t > 120_000) throw new Error("streams never became current");
    await sleep(50);
  }
}

async function stop(r: Started): Promise<void> {
  r.child.kill("SIGTERM");
  await new Promise((resolve) => r.child.once("exit", resolve));
}

/** Starts a router of `kind`, measures it; `keep` leaves it running (returned). */
async function measure(kind: Kind, opts: { peer?: string; keep?: boolean } = {}) {
  const r = await startRouter(kind, opts.peer);
  const atReady = await exactRatio(r.base);
  const currentMs = await allCurrent(r.base);
  const settled = await exactRatio(r.base);
  if (opts.keep !== true) await stop(r);
  console.log(
    `${kind}: listening after ${r.readyMs} ms; exact at listening ${atReady.toFixed(3)}, streams current ${Math.round(currentMs)} ms later, exact then ${settled.toFixed(3)}`,
  );
  return { readyMs: r.readyMs, atReady, settled, currentMs, router: r };
}

// The cold router must not overwrite the snapshot: it runs without one.
const cold = await measure("cold");
const warm = await measure("warm", { keep: true });
// A new replica with no file of its own, warm from the running one's GET /v1/snapshot.
const peer = await measure("peer", { peer: warm.router.base });
await stop(warm.router);
await Promise.all(pubs.map((p) => p.close()));
rmSync(dir, { recursive: true, force: true });

console.log(
  JSON.stringify({
    blocks: total,
    workers: WORKERS,
    engine_buffer_batches: BUFFER,
    snapshot_mb: Math.round((write.bytes / 2 ** 20) * 10) / 10,
    snapshot_write_ms: Math.round(write.totalMs),
    snapshot_capture_ms: Math.round(write.captureMs * 10) / 10,
    snapshot_capture_retries: capturesSpoiled,
    max_loop_pause_ms: Math.round(Math.max(firstWrite.pause, write.pause) * 10) / 10,
    steady_loop_pause_ms: Math.round(write.pause * 10) / 10,
    first_write_pause_ms: Math.round(firstWrite.pause * 10) / 10,
    first_write_ms: Math.round(firstWrite.totalMs),
    first_write_pause_cpu_ms: Math.round(firstWrite.pauseCpu * 10) / 10,
    steady_loop_pause_cpu_ms: Math.round(write.pauseCpu * 10) / 10,
    load_average: Math.round(loadavg()[0]! * 10) / 10,
    warm_ready_ms: warm.readyMs,
    cold_ready_ms: cold.readyMs,
    cold_exact_ratio: cold.settled,
    warm_exact_ratio: warm.settled,
    peer_ready_ms: peer.readyMs,
    peer_exact_at_listen: peer.atReady,
    peer_exact_ratio: peer.settled,
    cold_exact_at_listen: cold.atReady,
    warm_exact_at_listen: warm.atReady,
    cold_current_ms: Math.round(cold.currentMs),
    warm_current_ms: Math.round(warm.currentMs),
  }),
);
process.exit(0);
