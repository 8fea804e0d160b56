/**
 * Subscribing to many engines (`npm run bench:engines`): what one router process pays
 * per engine it follows. A few child processes (`many-engines-publishers.ts`) host N
 * `EnginePublisher`s (PUB + replay ROUTER each, as vLLM opens) and their `/metrics`; this
 * process subscribes to all of them exactly as `kvrouter serve` does (one `SubscriberPool`,
 * decode thread on) and scrapes them with one `MetricsScraper`. Measured, in phases:
 * start-up (all N streams connected), idle (CPU, RSS, file descriptors, threads), under
 * event load (CPU per batch and per engine), and scraping every engine each second (CPU,
 * event-loop delay, scrape latency). Prints a table, then one JSON line.
 *
 * Options (env): ENGINES_BENCH_ENGINES (default 1000), ENGINES_BENCH_PROCS (default 4),
 * ENGINES_BENCH_SECONDS (per phase, default 10), ENGINES_BENCH_HZ (batches per engine per
 * second under load, default 2), ENGINES_BENCH_METRICS_BYTES (default 16384),
 * ENGINES_BENCH_DECODE_THREAD (0 = receive and decode on the main thread).
 */

import { type ChildProcess, fork } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { RadixTreeIndex } from "../src/index/radix-tree.js";
import { MetricsScraper } from "../src/ingest/metrics-scraper.js";
import { SubscriberPool } from "../src/ingest/subscriber-pool.js";
import { LoadTracker } from "../src/load/load-tracker.js";
import { workerKey } from "../src/protocol/worker.js";

const ENGINES = Number(process.env.ENGINES_BENCH_ENGINES ?? 1000);
const PROCS = Number(process.env.ENGINES_BENCH_PROCS ?? 4);
const SECONDS = Number(process.env.ENGINES_BENCH_SECONDS ?? 10);
const HZ = Number(process.env.ENGINES_BENCH_HZ ?? 2);
const METRICS_BYTES = Number(process.env.ENGINES_BENCH_METRICS_BYTES ?? 16384);
const DECODE_THREAD = process.env.ENGINES_BENCH_DECODE_THREAD !== "0";

interface Engine {
  readonly events: string;
  readonly replay: string;
  readonly metrics: string;
}

function next(child: ChildProcess, type: string): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const onMsg = (m: Record<string, unknown>) => {
      if (m.type !== type) return;
      child.off("message", onMsg);
      resolve(m);
    };
    child.on("message", onMsg);
    child.once("exit", (code) => reject(new Error(`publisher child exited (${code})`)));
  });
}

const fds = () => readdirSync("/proc/self/fd").length;
const threads = () =>
  Number(/Threads:\s+(\d+)/.exec(readFileSync("/proc/self/status", "utf8"))![1]);
const rssMb = () => process.memoryUsage().rss / 2 ** 20;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** CPU (user+sys, all threads of this process) and loop delay over `f`. */
async function measure(f: () => Promise<unknown>) {
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await f();
  const wallMs = performance.now() - t0;
  const c = process.cpuUsage(c0);
  loop.disable();
  return {
    wallMs,
    cpuMs: (c.user + c.system) / 1000,
    loopP99Ms: loop.percentile(99) / 1e6,
    loopMaxMs: loop.max / 1e6,
  };
}

const script = fileURLToPath(new URL("./many-engines-publishers.ts", import.meta.url));
const per = Math.ceil(ENGINES / PROCS);
const children: ChildProcess[] = [];
const engines: Engine[] = [];
const tBind = performance.now();
for (let p = 0; p * per < ENGINES; p++) {
  const n = Math.min(per, ENGINES - p * per);
  const child = fork(script, [`${p * per},${n},${METRICS_BYTES}`], {
    execArgv: ["--import", "tsx"],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  children.push(child);
}
for (const child of children) {
  const ready = await next(child, "ready");
  engines.push(...(ready.engines as Engine[]));
}
console.log(
  `${engines.length} engines bound in ${PROCS} processes in ${((performance.now() - tBind) / 1000).toFixed(1)} s`,
);

const base = { rssMb: rssMb(), fds: fds(), threads: threads() };
const index = new RadixTreeIndex({ blockSize: 16 });
const pool = new SubscriberPool(index, { decodeThread: DECODE_THREAD, replayTimeoutMs: 2000 });
const t0 = performance.now();
engines.forEach((e, i) => {
  pool.add({
    workerId: `e${i}`,
    eventsEndpoint: e.events,
    replayEndpoint: e.replay,
    topic: "",
    dataParallelSize: 1,
    format: "vllm",
  });
});
const addMs = performance.now() - t0;
while (pool.states().some((s) => !s.connected)) await sleep(20);
const startupMs = performance.now() - t0;
await sleep(1000);
const subscribed = { rssMb: rssMb(), fds: fds(), threads: threads() };
console.log(
  `subscribed: add() ${addMs.toFixed(0)} ms, all connected after ${startupMs.toFixed(0)} ms; +${(subscribed.rssMb - base.rssMb).toFixed(1)} MB RSS, +${subscribed.fds - base.fds} fds, +${subscribed.threads - base.threads} threads`,
);

const idle = await measure(() => sleep(SECONDS * 1000));
console.log(
  `idle ${SECONDS} s: CPU ${idle.cpuMs.toFixed(0)} ms (${((idle.cpuMs / idle.wallMs) * 100).toFixed(2)} % of a core, ${((idle.cpuMs * 1000) / idle.wallMs / engines.length).toFixed(2)} µs/s per engine), loop p99 ${idle.loopP99Ms.toFixed(1)} ms`,
);

const batchesBefore = pool.states().reduce((a, s) => a + s.batches, 0);
let sent = 0;
const load = await measure(async () => {
  const done = children.map((c) => next(c, "loaded"));
  for (const c of children) c.send({ cmd: "load", perEngineHz: HZ, seconds: SECONDS });
  for (const d of await Promise.all(done)) sent += d.batches as number;
  while (pool.states().reduce((a, s) => a + s.batches, 0) - batchesBefore < sent) await sleep(20);
});
const gaps = pool.states().reduce((a, s) => a + s.gaps, 0);
console.log(
  `load ${HZ} batches/s per engine: ${sent} batches (${((sent / load.wallMs) * 1000).toFixed(0)}/s), CPU ${load.cpuMs.toFixed(0)} ms = ${((load.cpuMs * 1000) / sent).toFixed(1)} µs per batch, ${((load.cpuMs / load.wallMs) * 100).toFixed(1)} % of a core; gaps ${gaps}; loop p99 ${load.loopP99Ms.toFixed(1)} ms; RSS ${rssMb().toFixed(0)} MB`,
);

const tracker = new LoadTracker({ staleAfterMs: 5000 });
const scraper = new MetricsScraper({
  tracker,
  intervalMs: 1000,
  timeoutMs: 500,
  nowMs: Date.now,
});
engines.forEach((e, i) => {
  scraper.add({
    key: workerKey(`e${i}`),
    metricsUrl: e.metrics,
    kind: "vllm",
    model: null,
    dpRank: 0,
    blockSize: 16,
  });
});
const fdsBeforeScrape = fds();
const scrape = await measure(async () => {
  scraper.start();
  await sleep(SECONDS * 1000);
  await scraper.stop();
});
const st = scraper.stats();
const scrapes = st.reduce((a, s) => a + s.scrapes, 0);
const errors = st.reduce((a, s) => a + s.errors, 0);
const durs = st.map((s) => s.lastDurationMs ?? 0).sort((a, b) => a - b);
const fresh = st.filter((s) => !tracker.isStale(s.worker, Date.now())).length;
console.log(
  `scrape every engine each 1 s for ${SECONDS} s: ${scrapes} scrapes, ${errors} errors, CPU ${scrape.cpuMs.toFixed(0)} ms = ${((scrape.cpuMs * 1000) / Math.max(1, scrapes)).toFixed(0)} µs per scrape, ${((scrape.cpuMs / scrape.wallMs) * 100).toFixed(1)} % of a core; last scrape p50/max ${durs[durs.length >> 1]?.toFixed(1)} / ${durs[durs.length - 1]?.toFixed(1)} ms; loop p99/max ${scrape.loopP99Ms.toFixed(1)} / ${scrape.loopMaxMs.toFixed(1)} ms; +${fds() - fdsBeforeScrape} fds; fresh ${fresh}/${engines.length}`,
);

await pool.close();
for (const c of children) c.send({ cmd: "exit" });
console.log(
  JSON.stringify({
    bench: "many-engines",
    engines: engines.length,
    decode_thread: DECODE_THREAD,
    publisher_procs: children.length,
    startup_ms: Math.round(startupMs),
    rss_mb_per_engine: +((subscribed.rssMb - base.rssMb) / engines.length).toFixed(3),
    fds_per_engine: +((subscribed.fds - base.fds) / engines.length).toFixed(2),
    threads_added: subscribed.threads - base.threads,
    idle_cpu_pct: +((idle.cpuMs / idle.wallMs) * 100).toFixed(2),
    load_batches_per_s: Math.round((sent / load.wallMs) * 1000),
    load_cpu_us_per_batch: +((load.cpuMs * 1000) / sent).toFixed(1),
    load_cpu_pct: +((load.cpuMs / load.wallMs) * 100).toFixed(1),
    scrape_cpu_pct: +((scrape.cpuMs / scrape.wallMs) * 100).toFixed(1),
    scrape_cpu_us_per_scrape: Math.round((scrape.cpuMs * 1000) / Math.max(1, scrapes)),
    scrape_errors: errors,
    scrape_loop_max_ms: +scrape.loopMaxMs.toFixed(1),
    scrape_fresh: fresh,
  }),
);
setTimeout(() => process.exit(0), 500).unref();
