/**
 * `POST /v1/route` over loopback HTTP against its floor: the same bodies sent to a
 * fastify route that only parses the JSON. The server (`http-bench-server.ts`: the real
 * service, 16 workers, ~1M worker-blocks in the index) runs in a child process; this
 * process drives it with autocannon and keeps every response time (fractional ms, from
 * autocannon's `response` events: its own histogram rounds to whole ms) for percentiles.
 *
 * The machine is shared and its load drifts, so each case first warms both servers up
 * (unmeasured: JIT, and the garbage of the index fill, which the server also collects
 * before it answers), then alternates route and floor in short rounds (route first,
 * then floor first, …) and pools each side's times: both see the same conditions.
 * Prints a table, the load average, then one JSON line for the 8k-token case as the last line.
 *
 *   npm run bench:http [-- --duration 3 --rounds 3 --warmup 1 --connections 4]
 */

import { spawn } from "node:child_process";
import type { EventEmitter } from "node:events";
import { mkdtempSync, readFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import autocannon, { type Result } from "autocannon";

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
/** Measured seconds per target and case, split into `ROUNDS` alternating rounds. */
const DURATION_S = arg("duration", 3);
const ROUNDS = Math.max(1, Math.round(arg("rounds", 3)));
const WARMUP_S = arg("warmup", 1);
const CONNECTIONS = arg("connections", 4);

interface Ready {
  routePort: number;
  floorPort: number;
  workerBlocks: number;
  nodes: number;
  events: number;
  fillS: number;
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/**
 * Load `url` for `seconds`, appending each 200 response's time (ms) to `times`; returns
 * the seconds it really took (autocannon's own duration is coarse below one second).
 */
async function run(
  url: string,
  payloads: readonly string[],
  seconds: number,
  times: number[],
): Promise<number> {
  const started = performance.now();
  // Without a callback autocannon returns its instance, both an emitter and a promise.
  const instance = autocannon({
    url,
    connections: CONNECTIONS,
    duration: seconds,
    requests: payloads.map((body) => ({
      method: "POST" as const,
      headers: { "content-type": "application/json" },
      body,
    })),
  }) as unknown as EventEmitter & Promise<Result>;
  instance.on("response", (_client: unknown, status: number, _bytes: number, ms: number) => {
    if (status === 200) times.push(ms);
  });
  const result = await instance;
  if (result.non2xx > 0 || result.errors > 0) {
    const probe = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: payloads[0],
    });
    throw new Error(
      `${url}: ${result.non2xx} non-2xx, ${result.errors} errors; e.g. ${probe.status} ${await probe.text()}`,
    );
  }
  return (performance.now() - started) / 1000;
}

function summary(times: number[], seconds: number) {
  times.sort((a, b) => a - b);
  const round = (x: number) => Math.round(x * 1000) / 1000;
  return {
    rps: Math.round(times.length / seconds),
    p50: round(percentile(times, 50)),
    p99: round(percentile(times, 99)),
  };
}

/** Warm both targets up, then alternate them in rounds; percentiles over the pooled times. */
async function compare(routeUrl: string, floorUrl: string, payloads: readonly string[]) {
  if (WARMUP_S > 0) {
    await run(routeUrl, payloads, WARMUP_S, []);
    await run(floorUrl, payloads, WARMUP_S, []);
  }
  const routeTimes: number[] = [];
  const floorTimes: number[] = [];
  const seconds = DURATION_S / ROUNDS;
  const elapsed = new Map<number[], number>([
    [routeTimes, 0],
    [floorTimes, 0],
  ]);
  for (let r = 0; r < ROUNDS; r++) {
    const pair: [string, number[]][] = [
      [routeUrl, routeTimes],
      [floorUrl, floorTimes],
    ];
    if (r % 2 === 1) pair.reverse();
    for (const [url, times] of pair) {
      const took = await run(url, payloads, seconds, times);
      elapsed.set(times, elapsed.get(times)! + took);
    }
  }
  return {
    route: summary(routeTimes, elapsed.get(routeTimes)!),
    floor: summary(floorTimes, elapsed.get(floorTimes)!),
  };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "kvrouter-http-bench-"));
  const bodiesFile = join(dir, "bodies.json");
  // --expose-gc: the server collects the index fill's garbage before it reports ready.
  const server = spawn(
    process.execPath,
    ["--expose-gc", "--import", "tsx", "bench/http-bench-server.ts", bodiesFile],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  try {
    const ready = await new Promise<Ready>((resolve, reject) => {
      createInterface({ input: server.stdout! }).once("line", (l) => resolve(JSON.parse(l)));
      server.once("exit", (code) => reject(new Error(`bench server exited with ${code}`)));
    });
    console.log(
      `index: ${ready.workerBlocks} worker-blocks, ${ready.nodes} nodes, ${ready.events} events applied in ${ready.fillS.toFixed(1)} s`,
    );
    const bodies = JSON.parse(readFileSync(bodiesFile, "utf8")) as Record<string, string[]>;
    const rows: Record<string, number>[] = [];
    const loadBefore = loadavg()[0]!;
    for (const size of [1024, 8192]) {
      const payloads = bodies[size]!;
      const { route, floor } = await compare(
        `http://127.0.0.1:${ready.routePort}/v1/route`,
        `http://127.0.0.1:${ready.floorPort}/floor`,
        payloads,
      );
      rows.push({
        prompt_tokens: size,
        body_kb: Math.round(payloads[0]!.length / 1024),
        route_rps: route.rps,
        route_p50_ms: route.p50,
        route_p99_ms: route.p99,
        floor_rps: floor.rps,
        floor_p50_ms: floor.p50,
        floor_p99_ms: floor.p99,
        p99_ratio: Math.round((route.p99 / floor.p99) * 100) / 100,
      });
    }
    console.table(rows);
    const loadAfter = loadavg()[0]!;
    console.log(
      `connections ${CONNECTIONS}, ${DURATION_S} s per target and case in ${ROUNDS} alternating rounds after ${WARMUP_S} s warm-up, 16 workers, 32 distinct bodies`,
    );
    console.log(
      `load average (1 min): ${loadBefore.toFixed(2)} before, ${loadAfter.toFixed(2)} after`,
    );
    const last = rows[rows.length - 1]!;
    console.log(
      JSON.stringify({
        prompt_tokens: last.prompt_tokens,
        route_rps: last.route_rps,
        route_p50_ms: last.route_p50_ms,
        route_p99_ms: last.route_p99_ms,
        floor_rps: last.floor_rps,
        floor_p50_ms: last.floor_p50_ms,
        floor_p99_ms: last.floor_p99_ms,
        p99_ratio: last.p99_ratio,
        load_avg_1m: Math.round(loadAfter * 100) / 100,
      }),
    );
  } finally {
    server.kill("SIGTERM");
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
