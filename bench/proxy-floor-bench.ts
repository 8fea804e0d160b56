/**
 * What one proxy hop costs on this machine, whatever the proxy (`npm run bench:proxy-floor`):
 * the yardstick for `bench:gateway`'s "added to first byte" figures. An upstream that
 * answers the first byte at once (`proxy-floor-upstream.ts`) is called directly, through
 * the Node floor proxy `bench:gateway` uses (`gateway-floor-proxy.ts`, undici `dispatch`:
 * receive the body, forward it, stream the answer back, nothing else), through the same
 * floor with Node's own `http.request` upstream instead of undici (`node_http`), the undici
 * floor behind fastify as the gateway's routes use it (`fastify`), and through nginx
 * (`proxy_buffering off`, keep-alive upstream) when `nginx` is installed
 * (`apt-get install nginx-light`; skipped, and said so, when it is not). Streaming POSTs
 * with an 8k-token-id body, sequential, the order rotating request by request so every
 * path sees the same machine. Reported per path: p50/p99 of the time to the first body
 * byte, and what the proxy adds over direct both as a difference of percentiles (as
 * `bench:gateway` reports it) and as percentiles of the per-request difference.
 *
 *   npm run bench:proxy-floor [-- --pairs 1000 --prompt-tokens 8192]
 *
 * Last line: one JSON object (`direct_p50_ms`, `node_added_p50_ms`, `node_added_p99_ms`,
 * `nginx_added_p50_ms`, `nginx_added_p99_ms`, …, `loadavg_1m`).
 */

import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { setTimeout as sleep } from "node:timers/promises";
import { Agent, request } from "undici";

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const PAIRS = arg("pairs", 1000);
const PROMPT_TOKENS = arg("prompt-tokens", 8192);
const WARMUP = 100;

const children: ChildProcess[] = [];
let nginxDir: string | null = null;

/** Start a bench script as a child; resolves with the port it prints. */
async function startScript(file: string, args: string[] = []): Promise<number> {
  const path = new URL(file, import.meta.url).pathname;
  const proc = spawn(process.execPath, ["--import", "tsx", path, ...args], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  children.push(proc);
  const lines = createInterface({ input: proc.stdout! });
  for await (const line of lines) return (JSON.parse(line) as { port: number }).port;
  throw new Error(`${file} exited before listening`);
}

function hasNginx(): boolean {
  return spawnSync("nginx", ["-v"], { stdio: "ignore" }).status === 0;
}

/** nginx as a plain streaming reverse proxy in front of the upstream; its port. */
async function startNginx(upstreamPort: number): Promise<number> {
  nginxDir = mkdtempSync(join(tmpdir(), "kvrouter-proxy-floor-"));
  // A port the kernel just handed out and released: nginx cannot listen on port 0.
  const probe = (await import("node:net")).createServer();
  const port = await new Promise<number>((resolve) =>
    probe.listen(0, "127.0.0.1", () => resolve((probe.address() as { port: number }).port)),
  );
  await new Promise((resolve) => probe.close(resolve));
  const conf = join(nginxDir, "nginx.conf");
  writeFileSync(
    conf,
    `worker_processes 1;
daemon off;
pid ${nginxDir}/nginx.pid;
error_log ${nginxDir}/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path ${nginxDir}/body;
  proxy_temp_path ${nginxDir}/proxy;
  client_body_buffer_size 1m;
  upstream up { server 127.0.0.1:${upstreamPort}; keepalive 16; }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://up;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
`,
  );
  const proc = spawn("nginx", ["-c", conf], { stdio: ["ignore", "ignore", "inherit"] });
  children.push(proc);
  for (let i = 0; i < 100; i++) {
    try {
      await request(`http://127.0.0.1:${port}/`, { method: "POST", body: "{}" }).then((r) =>
        r.body.dump(),
      );
      return port;
    } catch {
      await sleep(50);
    }
  }
  throw new Error("nginx did not start listening");
}

const agent = new Agent({ keepAliveTimeout: 60_000 });
const body = JSON.stringify({
  model: "m",
  prompt: Array.from({ length: PROMPT_TOKENS }, (_, i) => (i * 7919) % 150_000),
  stream: true,
  max_tokens: 4,
});

/** Milliseconds from sending to the first body byte. */
async function firstByteMs(origin: string): Promise<number> {
  const t0 = process.hrtime.bigint();
  const r = await request(`${origin}/v1/completions`, {
    dispatcher: agent,
    method: "POST",
    headers: { "content-type": "application/json" },
    body,
  });
  let first = 0n;
  for await (const _ of r.body) if (first === 0n) first = process.hrtime.bigint();
  return Number(first - t0) / 1e6;
}

const pct = (xs: readonly number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
};
const r3 = (x: number) => Math.round(x * 1000) / 1000;

async function main(): Promise<void> {
  const upstream = `http://127.0.0.1:${await startScript("./proxy-floor-upstream.ts")}`;
  const paths: Record<string, string> = {
    direct: upstream,
    node: `http://127.0.0.1:${await startScript("./gateway-floor-proxy.ts", [upstream, "dispatch"])}`,
    // The same floor with Node's own HTTP client upstream instead of undici.
    node_http: `http://127.0.0.1:${await startScript("./gateway-floor-proxy.ts", [upstream, "node-http"])}`,
    // The undici floor behind fastify as the gateway uses it (no gateway work).
    fastify: `http://127.0.0.1:${await startScript("./gateway-floor-proxy.ts", [upstream, "fastify-dispatch"])}`,
  };
  if (hasNginx())
    paths.nginx = `http://127.0.0.1:${await startNginx(Number(new URL(upstream).port))}`;
  else console.log("nginx is not installed: its path is skipped (apt-get install nginx-light)");
  const names = Object.keys(paths);
  const times: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
  for (let i = 0; i < WARMUP; i++) for (const n of names) await firstByteMs(paths[n]!);
  const load0 = loadavg()[0]!;
  for (let i = 0; i < PAIRS; i++) {
    for (let k = 0; k < names.length; k++) {
      const n = names[(i + k) % names.length]!;
      times[n]!.push(await firstByteMs(paths[n]!));
    }
  }
  const out: Record<string, number | string> = {
    pairs: PAIRS,
    prompt_tokens: PROMPT_TOKENS,
    body_bytes: Buffer.byteLength(body),
  };
  const direct = times.direct!;
  out.direct_p50_ms = r3(pct(direct, 0.5));
  out.direct_p99_ms = r3(pct(direct, 0.99));
  console.log(`${PAIRS} requests per path, ${PROMPT_TOKENS}-token bodies, sequential`);
  console.log(
    "path      first byte p50/p99 ms   added p50/p99 (of percentiles)   added p50/p99 (paired)",
  );
  for (const n of names) {
    const t = times[n]!;
    const paired = t.map((x, i) => x - direct[i]!);
    if (n !== "direct") {
      out[`${n}_p50_ms`] = r3(pct(t, 0.5));
      out[`${n}_p99_ms`] = r3(pct(t, 0.99));
      out[`${n}_added_p50_ms`] = r3(pct(t, 0.5) - pct(direct, 0.5));
      out[`${n}_added_p99_ms`] = r3(pct(t, 0.99) - pct(direct, 0.99));
      out[`${n}_paired_added_p50_ms`] = r3(pct(paired, 0.5));
      out[`${n}_paired_added_p99_ms`] = r3(pct(paired, 0.99));
    }
    console.log(
      `${n.padEnd(8)}  ${pct(t, 0.5).toFixed(3).padStart(7)} ${pct(t, 0.99).toFixed(3).padStart(7)}` +
        (n === "direct"
          ? ""
          : `         ${(pct(t, 0.5) - pct(direct, 0.5)).toFixed(3).padStart(7)} ${(pct(t, 0.99) - pct(direct, 0.99)).toFixed(3).padStart(7)}` +
            `                  ${pct(paired, 0.5).toFixed(3).padStart(7)} ${pct(paired, 0.99).toFixed(3).padStart(7)}`),
    );
  }
  out.loadavg_1m_start = r3(load0);
  out.loadavg_1m = r3(loadavg()[0]!);
  console.log(JSON.stringify(out));
}

try {
  await main();
} finally {
  for (const c of children) c.kill("SIGTERM");
  await agent.close();
  if (nginxDir !== null) {
    await sleep(100);
    rmSync(nginxDir, { recursive: true, force: true });
  }
}
