/**
 * `POST /v1/route` over loopback HTTP against its floor: the same bodies sent to a
 * fastify route that only parses the JSON. The server (`http-bench-server.ts`: the real
 * service, 16 workers, ~1M worker-blocks in the index) runs in a child process; this
 * process drives it with autocannon and keeps every response time (fractional ms, from
 * autocannon's `response` events: its own histogram rounds to whole ms) for percentiles.
 * Prints a table, then one JSON line for the 8k-token case as the last line.
 *
 *   npm run bench:http [-- --duration 3 --connections 4]
 */

import { spawn } from "node:child_process";
import type { EventEmitter } from "node:events";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import autocannon, { type Result } from "autocannon";

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const DURATION_S = arg("duration", 3);
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

async function run(url: string, payloads: readonly string[]) {
  const times: number[] = [];
  // Without a callback autocannon returns its instance, both an emitter and a promise.
  const instance = autocannon({
    url,
    connections: CONNECTIONS,
    duration: DURATION_S,
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
  times.sort((a, b) => a - b);
  const round = (x: number) => Math.round(x * 1000) / 1000;
  return {
    rps: Math.round(times.length / DURATION_S),
    p50: round(percentile(times, 50)),
    p99: round(percentile(times, 99)),
  };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "kvrouter-http-bench-"));
  const bodiesFile = join(dir, "bodies.json");
  const tsx = join(process.cwd(), "node_modules", ".bin", "tsx");
  const server = spawn(tsx, ["bench/http-bench-server.ts", bodiesFile], {
    stdio: ["ignore", "pipe", "inherit"],
  });
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
    for (const size of [1024, 8192]) {
      const payloads = bodies[size]!;
      const route = await run(`http://127.0.0.1:${ready.routePort}/v1/route`, payloads);
      const floor = await run(`http://127.0.0.1:${ready.floorPort}/floor`, payloads);
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
    console.log(
      `connections ${CONNECTIONS}, ${DURATION_S} s per case, 16 workers, 32 distinct bodies`,
    );
    const last = rows[rows.length - 1]!;
    console.log(
      JSON.stringify({
        prompt_tokens: last.prompt_tokens,
        route_rps: last.route_rps,
        route_p99_ms: last.route_p99_ms,
        floor_rps: last.floor_rps,
        floor_p99_ms: last.floor_p99_ms,
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
