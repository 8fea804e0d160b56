/**
 * What gateway mode costs: `kvrouter serve` (gateway on) and one simulated vLLM worker as
 * child processes on loopback, driven from this process over keep-alive connections.
 *
 * 1. Added latency to the first byte: streaming completions with 8k-token prompts,
 *    sequential, each prompt sent to the worker directly, through the gateway, and
 *    through two floor proxies (`gateway-floor-proxy.ts`: forward and stream back, nothing
 *    else; with undici's `request` as the gateway, and with its leaner `dispatch`), the
 *    order rotating request by request (all see the same machine). Reported:
 *    p50/p99 of each path's time to first body byte, the gateway's and the floor's
 *    differences to direct, the gateway's to the floor's, and the gateway's own time on
 *    each request's path as it reports it (`server-timing`: parsing, routing and sending
 *    before the worker, handing the first byte on after it), free of the worker's noise.
 * 2. Gateway CPU per request: the gateway process's own CPU time (utime + stime from
 *    /proc, whole process: parsing, routing, relaying, ingesting the worker's KV events,
 *    scraping) over a gateway-only sequential run, per request; for 8k- and 100k-token
 *    prompts.
 * 3. Throughput: closed loop with `--concurrency` clients for `--duration` s, through the
 *    gateway and directly (the machine's ceiling: client, gateway and worker share it).
 *    The simulated worker caps near 100 req/s, so `gateway_rps` is measured in front of
 *    `--responders` low-CPU endpoints (`gateway-responder.ts`, one process, each
 *    publishing the KV events an engine would), with the CPU per chat of the gateway,
 *    the responders and this client over the loop (all share the 2 cores), and the
 *    gateway's main thread alone. The loop's client sends on bare keep-alive sockets and
 *    the responders answer on them (`raw-http.ts`; `--client undici` and
 *    `--responder-http node` give the earlier harness), so that they take as little of
 *    the shared cores as they can. `--rounds` rounds alternate the gateway as configured
 *    by default (tokenizing on a worker thread), tokenization alone on one thread in a
 *    fresh process (`tokenize-only.ts`, the loop's conversations, warmed as the gateway), the
 *    same chat loop (same chats, clients, duration and responders) through the bare floor
 *    proxy instead of the gateway (`dispatch`, round-robin over the responders: what any
 *    Node proxy reaches in this loop on these cores; `floor_rps`, `floor_over_tokenize_only`,
 *    its process's CPU per chat `loop_floor_cpu_ms_per_request`), and the gateway
 *    tokenizing on its event loop (`gateway.tokenizerThreads: 0`); medians, and each
 *    round's figures in `throughput_rounds`.
 *
 * 4. Tokenization (`gateway-chat.ts`): the gateway tokenizes with the bundled Qwen3 files
 *    (`gateway.tokenizers`). In this process: p50/p99 of an 8k-token chat whose history
 *    was seen and whose last user turn is new, the cold p99 (a conversation never seen),
 *    and tokenization-only throughput on one thread in this process
 *    (`tokenize_only_rps_this_process`; `tokenize_only_rps` is part 3's fresh-process
 *    figure, the one `gateway_rps` is held against). Through the gateway: the same chats
 *    in a closed loop (`gateway_rps`), and gateway CPU per request for 8k- and 100k-token
 *    chats continuing a seen conversation, and for 100k-token chats never seen (cold).
 *
 * `--only first-byte` runs part 1 alone (about 40 s: for paired runs); the gateway's
 * young-generation collections are counted over part 1 (`first_byte_gateway_scavenges`)
 * and, per chat, over the default (tokenizer-thread) throughput rounds only, as their
 * median (`loop_gateway_scavenges_per_request`), from its `nodejs_gc_duration_seconds`.
 * `GATEWAY_BENCH_ROUTER_NODE_OPTIONS` gives the gateway processes (only them) Node
 * options, e.g. `--max-semi-space-size=64`.
 *
 * Parts 1–3 send token ids (the gateway uses them as given). The simulated worker uses
 * its stand-in tokenizer and prefills at 10^9 tokens/s so its time is not the figure.
 *
 *   npm run bench:gateway [-- --pairs 300 --concurrency 16 --duration 5 --prompt-tokens 8192
 *                            --rounds 3 --only throughput|first-byte --warm-loop 5]
 *
 * Long file: the parts are one run sharing its processes (fleet, floor proxy, responders)
 * and client helpers, and one JSON last line; the workloads (`gateway-chat.ts`) and the
 * stand-in processes (`gateway-floor-proxy.ts`, `gateway-responder.ts`) live beside it.
 */

import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { Agent, request } from "undici";
import { ChildGroup } from "../src/demo/child-group.js";
import { type FleetWorkerEndpoints, launchFleet, startRouter } from "../src/demo/demo-fleet.js";
import {
  ChatBodies,
  type ChatMessage,
  history,
  historyTokenIds,
  tokenizeFigures,
  withNewTurn,
} from "./gateway-chat.js";
import { postHead, RawConnection } from "./raw-http.js";

/** `GATEWAY_BENCH_ROUTER_NODE_OPTIONS`: Node options for the gateway processes alone. */
const ROUTER_NODE_OPTIONS = process.env.GATEWAY_BENCH_ROUTER_NODE_OPTIONS;

/** Tokenizer threads in the throughput rounds: `gateway.tokenizerThreads`' default. */
const TOKENIZER_THREADS = 1;

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
/** `--name V` for V one of `values` (the first when absent); anything else is refused. */
function choice<const T extends readonly string[]>(name: string, values: T): T[number] {
  const i = process.argv.indexOf(`--${name}`);
  const v = i > 0 ? process.argv[i + 1] : values[0];
  if (!values.includes(v as string)) throw new Error(`--${name}: ${values.join(" or ")}`);
  return v as T[number];
}
const PAIRS = arg("pairs", 300);
const CPU_REQUESTS = arg("cpu-requests", 300);
const CPU_REQUESTS_100K = arg("cpu-requests-100k", 30);
const CONCURRENCY = arg("concurrency", 16);
const DURATION_S = arg("duration", 5);
/**
 * `--warm-loop S`: before each gateway's measured loop, S seconds of the same closed loop
 * through it, unmeasured (default 5; 0 = none, the figures before session 7). A gateway
 * started seconds earlier is still compiling its hot code: in a `perf` sample of a 15 s
 * loop, V8's compiler threads (TurboFan) took 12 % of the process's samples in its first
 * seconds and 6.5 % 4 s later, and 5 s of warm-up took ~1 ms of the ~4 ms of CPU per chat
 * (docs/benchmarks.md, "The gateway's CPU per chat"). A running gateway's steady state
 * is the figure; tokenization alone is timed after its own warm passes (`tokenizeFigures`).
 */
const WARM_LOOP_S = arg("warm-loop", 5);
const PROMPT_TOKENS = arg("prompt-tokens", 8192);
const RESPONDERS = arg("responders", 4);
/**
 * `--client raw` (default): the closed chat loops send on bare keep-alive sockets
 * (`raw-http.ts`), the least CPU per chat for this process, which shares the 2 cores with
 * the gateway; `--client undici`: undici's `request`, as before 2026-12-02.
 */
const CLIENT = choice("client", ["raw", "undici"] as const);
/** `--responder-http raw|node`: how the stand-in engines serve HTTP (`gateway-responder.ts`). */
const RESPONDER_HTTP = choice("responder-http", ["raw", "node"] as const);
const MAX_TOKENS = 4;
/** The closed loop's conversations are `history(HISTORY_FIRST_ID + i, PROMPT_TOKENS)`. */
const HISTORY_FIRST_ID = 500 + PROMPT_TOKENS;
/** Throughput rounds: each runs the gateway with its tokenizer on a worker thread, then on the event loop. */
const ROUNDS = arg("rounds", 3);
/** `--only throughput`: just the chat loops in front of the responders and tokenization alone. */
const ONLY = (() => {
  const i = process.argv.indexOf("--only");
  return i > 0 ? process.argv[i + 1] : undefined;
})();
/**
 * `GATEWAY_BENCH_PROF=DIR`: the gateways write a `--cpu-prof` there (part 1's fleet —
 * gateway and simulated worker — and the throughput part's gateways).
 */
const PROF_DIR = process.env.GATEWAY_BENCH_PROF;
const profArgs = () =>
  PROF_DIR === undefined
    ? process.execArgv
    : [...process.execArgv, "--cpu-prof", `--cpu-prof-dir=${PROF_DIR}`];

const agent = new Agent({ keepAliveTimeout: 30_000, connections: 64 });

let seq = 0;
/** A distinct prompt of `n` token ids (a shared 1k-token head, like a system prompt). */
function prompt(n: number): number[] {
  const id = ++seq;
  return Array.from({ length: n }, (_, i) =>
    i < 1024 ? 100 + i : 2000 + ((id * 7919 + i * 104729) % 60000),
  );
}

function body(tokens: readonly number[]): string {
  return JSON.stringify({
    model: "sim-model",
    prompt: tokens,
    max_tokens: MAX_TOKENS,
    stream: true,
  });
}

function chatBody(messages: readonly ChatMessage[]): string {
  return JSON.stringify({ model: "sim-model", messages, max_tokens: MAX_TOKENS, stream: true });
}

/**
 * One streaming completion; returns ms to the first body byte (throws on non-200). The
 * gateway's own time on the path (its `server-timing` header) goes to `own` if given.
 */
async function complete(
  base: string,
  payload: string | Buffer,
  path = "/v1/completions",
  own?: number[],
): Promise<number> {
  const t0 = performance.now();
  const res = await request(`${base}${path}`, {
    dispatcher: agent,
    method: "POST",
    headers: { "content-type": "application/json" },
    body: payload,
  });
  let first = -1;
  for await (const _chunk of res.body) if (first < 0) first = performance.now() - t0;
  if (res.statusCode !== 200) throw new Error(`${base}: HTTP ${res.statusCode}`);
  const timing = /kvrouter;dur=([\d.]+)/.exec(String(res.headers["server-timing"] ?? ""));
  if (own !== undefined && timing !== null) own.push(Number(timing[1]));
  return first;
}

/** CPU seconds (user + system) of a process (or, with `tid`, one of its threads) so far. */
function cpuSeconds(pid: number, tid?: number): number {
  const path = tid === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${tid}/stat`;
  const stat = readFileSync(path, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // utime and stime are fields 14 and 15 of stat(5), i.e. 11 and 12 after the name.
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** A counter's value on a kvrouter's `/metrics` (0 when absent). */
async function metricValue(base: string, name: string): Promise<number> {
  const res = await request(`${base}/metrics`, { dispatcher: agent });
  const text = await res.body.text();
  const m = new RegExp(`^${name} (\\S+)$`, "m").exec(text);
  return m === null ? 0 : Number(m[1]);
}

/** The gateway's garbage collections so far by kind (prom-client's `nodejs_gc_duration_seconds`). */
async function collections(base: string): Promise<Record<string, { count: number; s: number }>> {
  const res = await request(`${base}/metrics`, { dispatcher: agent });
  const text = await res.body.text();
  const out: Record<string, { count: number; s: number }> = {};
  for (const m of text.matchAll(
    /^nodejs_gc_duration_seconds_(count|sum)\{kind="(\w+)"\} (\S+)$/gm,
  )) {
    const k = out[m[2]!] ?? { count: 0, s: 0 };
    out[m[2]!] = k;
    if (m[1] === "count") k.count = Number(m[3]);
    else k.s = Number(m[3]);
  }
  return out;
}

function gcDelta(
  before: Record<string, { count: number; s: number }>,
  after: Record<string, { count: number; s: number }>,
  kind: string,
): { count: number; s: number } {
  const a = after[kind] ?? { count: 0, s: 0 };
  const b = before[kind] ?? { count: 0, s: 0 };
  return { count: a.count - b.count, s: a.s - b.s };
}

/** CPU seconds of each thread of a process so far, by thread id. */
function threadCpuSeconds(pid: number): Map<number, number> {
  const out = new Map<number, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      out.set(Number(tid), cpuSeconds(pid, Number(tid)));
    } catch {
      // The thread ended meanwhile.
    }
  }
  return out;
}

/**
 * CPU ms per request of each of a process's threads other than the main one over an
 * interval, largest first (the tokenizer thread, the KV-event decode thread, then V8's
 * and libuv's helpers: Node 20 names none of them, so they are told apart by size).
 */
function otherThreadsMs(
  pid: number,
  before: Map<number, number>,
  after: Map<number, number>,
  requests: number,
): number[] {
  const out: number[] = [];
  for (const [tid, s] of after) {
    if (tid === pid) continue;
    out.push(((s - (before.get(tid) ?? 0)) * 1000) / requests);
  }
  return out.sort((a, b) => b - a).filter((ms) => ms >= 0.005);
}

const pct = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
};
const r3 = (x: number) => Math.round(x * 1000) / 1000;

async function closedLoop(base: string, seconds: number, n: number): Promise<number> {
  const payloads = Array.from({ length: 64 }, () => body(prompt(n)));
  const end = performance.now() + seconds * 1000;
  let done = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async (_, c) => {
      for (let i = c; performance.now() < end; i += CONCURRENCY) {
        await complete(base, payloads[i % payloads.length]!);
        done++;
      }
    }),
  );
  return done / seconds;
}

/** `n` chats in a closed loop of `CONCURRENCY` clients for `DURATION_S` s; chats/s. */
/** The closed loop's bodies (the client's CPU per chat is reported beside the gateway's). */
const loopBodies = new ChatBodies("sim-model", MAX_TOKENS);

async function chatLoop(
  bases: readonly string[],
  hs: readonly ChatMessage[][],
  durationS = DURATION_S,
): Promise<number> {
  const end = performance.now() + durationS * 1000;
  let done = 0;
  const path = "/v1/chat/completions";
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async (_, c) => {
      // `--client raw`: one bare keep-alive socket per client and base (`raw-http.ts`).
      const conns = bases.map((b) => {
        const u = new URL(b);
        return { hostPort: u.host, conn: new RawConnection(u.hostname, Number(u.port)) };
      });
      try {
        for (let i = c; performance.now() < end; i += CONCURRENCY) {
          const h = hs[i % hs.length]!;
          const k = i % bases.length;
          if (CLIENT === "undici") await complete(bases[k]!, loopBodies.next(h), path);
          else {
            const { hostPort, conn } = conns[k]!;
            const [head, rest] = loopBodies.nextParts(h);
            const length = head.length + rest.length;
            const a = await conn.send(postHead(hostPort, path, length), head, rest);
            if (a.status !== 200) throw new Error(`${bases[k]}: HTTP ${a.status}`);
          }
          done++;
        }
      } finally {
        for (const { conn } of conns) conn.close();
      }
    }),
  );
  return done / durationS;
}

/**
 * `RESPONDERS` low-CPU endpoints in one child process (`gateway-responder.ts`), given the
 * token ids of the workload's conversations so they publish an engine's KV events.
 */
async function startResponders(hs: readonly ChatMessage[][]) {
  const dir = mkdtempSync(join(tmpdir(), "kvrouter-gw-bench-"));
  const tokensFile = join(dir, "tokens.json");
  writeFileSync(tokensFile, JSON.stringify(await historyTokenIds(hs)));
  const proc = spawn(
    process.execPath,
    [
      ...process.execArgv,
      new URL("./gateway-responder.ts", import.meta.url).pathname,
      ...["--workers", String(RESPONDERS), "--tokens", tokensFile, "--http", RESPONDER_HTTP],
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  try {
    const endpoints = await new Promise<FleetWorkerEndpoints[]>((resolve, reject) => {
      const eps: FleetWorkerEndpoints[] = [];
      proc.once("error", reject);
      proc.once("exit", (code) => reject(new Error(`gateway-responder exited (${code})`)));
      createInterface({ input: proc.stdout! }).on("line", (l) => {
        const o = JSON.parse(l) as { ready?: boolean; id: string; url: string; events: string };
        if (o.ready === true) resolve(eps);
        else eps.push({ id: o.id, url: o.url, events: o.events, replay: null });
      });
    });
    return { dir, proc, endpoints };
  } catch (err) {
    proc.kill("SIGTERM");
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

/**
 * The floor proxy (`gateway-floor-proxy.ts`) as a child process in front of `upstreams`
 * (round-robin when several); resolves once it listens.
 */
async function spawnFloor(upstreams: readonly string[], mode: "request" | "dispatch") {
  const proxy = new URL("./gateway-floor-proxy.ts", import.meta.url).pathname;
  const proc = spawn(process.execPath, [...process.execArgv, proxy, upstreams.join(","), mode], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const port = await new Promise<number>((resolve, reject) => {
    proc.once("error", reject);
    proc.once("exit", (code) => reject(new Error(`gateway-floor-proxy exited (${code})`)));
    createInterface({ input: proc.stdout! }).once("line", (l) =>
      resolve((JSON.parse(l) as { port: number }).port),
    );
  });
  return { url: `http://127.0.0.1:${port}`, pid: proc.pid!, proc };
}

/**
 * The same closed chat loop as the gateway's (same chats, clients, duration and
 * responders) through the bare floor proxy (`dispatch`: receive, forward with undici,
 * stream back), round-robin over the responders: what any Node proxy reaches in this
 * loop on these cores. CPU per chat of the proxy, the responders and this client.
 */
async function floorThroughput(hs: readonly ChatMessage[][]) {
  const { dir, proc, endpoints } = await startResponders(hs);
  let floor: Awaited<ReturnType<typeof spawnFloor>> | undefined;
  try {
    floor = await spawnFloor(
      endpoints.map((e) => e.url),
      "dispatch",
    );
    process.stderr.write(
      `floor proxy ${floor.url} (pid ${floor.pid}) before ${RESPONDERS} responders (pid ${proc.pid})\n`,
    );
    // Each history once to every responder (consecutive requests go to the next one), so
    // each has cached every conversation, as in the gateway's rounds after their warm-up.
    for (const h of hs) {
      for (let k = 0; k < RESPONDERS; k++) {
        await complete(floor.url, chatBody(withNewTurn(h)), "/v1/chat/completions");
      }
    }
    const before = {
      floor: cpuSeconds(floor.pid),
      resp: cpuSeconds(proc.pid!),
      client: process.cpuUsage(),
    };
    const floorRps = await chatLoop([floor.url], hs);
    const n = floorRps * DURATION_S;
    const client = process.cpuUsage(before.client);
    const perChat = (s: number) => (s * 1000) / n;
    return {
      floorRps,
      floorCpuMs: perChat(cpuSeconds(floor.pid) - before.floor),
      responderCpuMs: perChat(cpuSeconds(proc.pid!) - before.resp),
      clientCpuMs: perChat((client.user + client.system) / 1e6),
    };
  } finally {
    floor?.proc.kill("SIGTERM");
    proc.kill("SIGTERM");
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Throughput with engines that cost next to nothing (`gateway-responder.ts`: several
 * endpoints in one process, each publishing the KV events of the workload's
 * conversations), so the gateway is what saturates the cores: a second `kvrouter serve`
 * in front of them, its tokenizer warmed on the conversations, then chats in a closed loop
 * through it and, for the ceiling of client + responders, directly. CPU per chat of each
 * process over the gateway loop is reported, since all share the 2 cores.
 */
async function fastFleetThroughput(
  hs: readonly ChatMessage[][],
  gatewayOverrides: Readonly<Record<string, unknown>> = {},
  withDirect = true,
) {
  const { dir, proc, endpoints } = await startResponders(hs);
  const routerGroup = new ChildGroup(profArgs());
  try {
    const router = await startRouter(
      routerGroup,
      dir,
      endpoints,
      16,
      gatewayOverrides,
      ROUTER_NODE_OPTIONS,
    );
    process.stderr.write(
      `gateway ${router.url} (pid ${router.pid}) before ${RESPONDERS} responders (pid ${proc.pid})\n`,
    );
    // Twice, the second time once the tokenizer's worker thread has surely loaded: its
    // segment cache then holds every history, as in a gateway that has run for a while.
    for (let round = 0; round < 2; round++) {
      if (round === 1) await new Promise((r) => setTimeout(r, 2000));
      for (const h of hs) {
        await complete(router.url, chatBody(withNewTurn(h)), "/v1/chat/completions");
      }
    }
    if (WARM_LOOP_S > 0) await chatLoop([router.url], hs, WARM_LOOP_S);
    const onLoopBefore = await metricValue(
      router.url,
      "kvrouter_gateway_tokenize_event_loop_total",
    );
    const gcBefore = await collections(router.url);
    const before = {
      gwMain: cpuSeconds(router.pid, router.pid),
      gw: cpuSeconds(router.pid),
      gwThreads: threadCpuSeconds(router.pid),
      resp: cpuSeconds(proc.pid!),
      client: process.cpuUsage(),
    };
    const gatewayRps = await chatLoop([router.url], hs);
    const n = gatewayRps * DURATION_S;
    const client = process.cpuUsage(before.client);
    const perChat = (s: number) => (s * 1000) / n;
    const gatewayCpuMs = perChat(cpuSeconds(router.pid) - before.gw);
    const gatewayMainCpuMs = perChat(cpuSeconds(router.pid, router.pid) - before.gwMain);
    const onLoop =
      (await metricValue(router.url, "kvrouter_gateway_tokenize_event_loop_total")) - onLoopBefore;
    const otherThreadsCpuMs = otherThreadsMs(
      router.pid,
      before.gwThreads,
      threadCpuSeconds(router.pid),
      n,
    );
    const responderCpuMs = perChat(cpuSeconds(proc.pid!) - before.resp);
    const gcAfter = await collections(router.url);
    const clientCpuMs = perChat((client.user + client.system) / 1e6);
    const directRps = withDirect
      ? await chatLoop(
          endpoints.map((e) => e.url),
          hs,
        )
      : Number.NaN;
    return {
      gatewayRps,
      directRps,
      gatewayCpuMs,
      gatewayMainCpuMs,
      otherThreadsCpuMs,
      onEventLoopShare: onLoop / n,
      scavengesPerChat: gcDelta(gcBefore, gcAfter, "minor").count / n,
      scavengeMsPerChat: perChat(gcDelta(gcBefore, gcAfter, "minor").s),
      majorGcsPerChat: gcDelta(gcBefore, gcAfter, "major").count / n,
      majorGcMsPerChat: perChat(gcDelta(gcBefore, gcAfter, "major").s),
      responderCpuMs,
      clientCpuMs,
    };
  } finally {
    await routerGroup.stopAll();
    proc.kill("SIGTERM");
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Tokenization alone in a fresh process (`tokenize-only.ts`): the gateway loop's
 * conversations (`history(HISTORY_FIRST_ID + i)`), warmed as each round's gateway is, then
 * `DURATION_S` s on one thread; chats/s and CPU ms per chat.
 */
async function tokenizeOnly(histories: number): Promise<{ rps: number; cpu_ms: number }> {
  const script = new URL("./tokenize-only.ts", import.meta.url).pathname;
  const args = [
    ...["--prompt-tokens", String(PROMPT_TOKENS), "--first-id", String(HISTORY_FIRST_ID)],
    ...["--histories", String(histories), "--seconds", String(DURATION_S)],
    ...["--warm", String(WARM_LOOP_S)],
  ];
  const proc = spawn(process.execPath, [...process.execArgv, script, ...args], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  return new Promise((resolve, reject) => {
    proc.once("error", reject);
    proc.once("exit", (code) => {
      if (code !== 0) reject(new Error(`tokenize-only exited (${code})`));
    });
    createInterface({ input: proc.stdout! }).once("line", (l) => resolve(JSON.parse(l)));
  });
}

/**
 * Throughput, variants alternating in `ROUNDS` rounds on the same machine: the gateway as
 * configured by default (tokenizer on a worker thread), tokenization alone on one thread,
 * the bare floor proxy in the same chat loop (`floorThroughput`), and the gateway
 * tokenizing on its event loop (`gateway.tokenizerThreads: 0`). The median of the rounds
 * is reported for each.
 */
async function throughputRounds(hs: readonly ChatMessage[][]) {
  const pool: Awaited<ReturnType<typeof fastFleetThroughput>>[] = [];
  const loop: Awaited<ReturnType<typeof fastFleetThroughput>>[] = [];
  const tok: number[] = [];
  const tokCpu: number[] = [];
  const floor: Awaited<ReturnType<typeof floorThroughput>>[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    pool.push(await fastFleetThroughput(hs, {}, r === 0));
    const t = await tokenizeOnly(hs.length);
    tok.push(Math.round(t.rps));
    tokCpu.push(r3(t.cpu_ms));
    floor.push(await floorThroughput(hs));
    loop.push(await fastFleetThroughput(hs, { tokenizerThreads: 0 }, false));
  }
  const med = (xs: number[]) => {
    const s = [...xs].sort((a, b) => a - b);
    const m = s.length >> 1;
    return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
  };
  type Figure = Exclude<keyof (typeof pool)[number], "otherThreadsCpuMs">;
  const share = (rs: typeof pool) => rs.map((x) => r3(x.onEventLoopShare));
  const pick = (rs: typeof pool, k: Figure) => med(rs.map((x) => x[k]));
  return {
    rounds: {
      pool: pool.map((x) => Math.round(x.gatewayRps)),
      loop: loop.map((x) => Math.round(x.gatewayRps)),
      tokenize_only: tok,
      ratio: pool.map((x, i) => r3(x.gatewayRps / tok[i]!)),
      floor: floor.map((x) => Math.round(x.floorRps)),
      floor_ratio: floor.map((x, i) => r3(x.floorRps / tok[i]!)),
      /** CPU ms per chat in each round: the gateway process, the floor proxy, tokenization alone. */
      pool_cpu_ms: pool.map((x) => r3(x.gatewayCpuMs)),
      floor_cpu_ms: floor.map((x) => r3(x.floorCpuMs)),
      tokenize_only_cpu_ms: tokCpu,
      /** Share of the loop's chats tokenized on the event loop (the thread busy or loading). */
      on_event_loop: share(pool),
    },
    gatewayRps: pick(pool, "gatewayRps"),
    loopRps: pick(loop, "gatewayRps"),
    tokenizeOnlyRps: med(tok),
    floorRps: med(floor.map((x) => x.floorRps)),
    floorOverTokenizeOnly: med(floor.map((x, i) => x.floorRps / tok[i]!)),
    floorCpuMs: med(floor.map((x) => x.floorCpuMs)),
    floorResponderCpuMs: med(floor.map((x) => x.responderCpuMs)),
    floorClientCpuMs: med(floor.map((x) => x.clientCpuMs)),
    tokenizeOnlyCpuMs: med(tokCpu),
    directRps: pool[0]!.directRps,
    gatewayCpuMs: pick(pool, "gatewayCpuMs"),
    gatewayMainCpuMs: pick(pool, "gatewayMainCpuMs"),
    loopGatewayCpuMs: pick(loop, "gatewayCpuMs"),
    loopGatewayMainCpuMs: pick(loop, "gatewayMainCpuMs"),
    // The round whose main thread is the median's: its other threads, largest first.
    otherThreadsCpuMs: [...pool].sort((a, b) => a.gatewayMainCpuMs - b.gatewayMainCpuMs)[
      (pool.length - 1) >> 1
    ]!.otherThreadsCpuMs,
    responderCpuMs: pick(pool, "responderCpuMs"),
    scavengesPerChat: pick(pool, "scavengesPerChat"),
    scavengeMsPerChat: pick(pool, "scavengeMsPerChat"),
    majorGcsPerChat: pick(pool, "majorGcsPerChat"),
    majorGcMsPerChat: pick(pool, "majorGcMsPerChat"),
    clientCpuMs: pick(pool, "clientCpuMs"),
  };
}

type Throughput = Awaited<ReturnType<typeof throughputRounds>>;

/** The throughput part's JSON fields. */
function throughputFields(t: Throughput) {
  return {
    warm_loop_s: WARM_LOOP_S,
    gateway_rps: Math.round(t.gatewayRps),
    tokenize_only_rps: Math.round(t.tokenizeOnlyRps),
    gateway_over_tokenize_only: r3(t.gatewayRps / t.tokenizeOnlyRps),
    // The same chat loop through the bare floor proxy (`dispatch`, round-robin over the
    // responders): what any Node proxy reaches here, against the same tokenization alone
    // (median of the rounds' ratios), and its process's CPU per chat. Named `loop_…`
    // because `floor_cpu_ms_per_request` is part 2's (the `request` floor, one 8k
    // token-id request at a time).
    floor_rps: Math.round(t.floorRps),
    floor_over_tokenize_only: r3(t.floorOverTokenizeOnly),
    loop_floor_cpu_ms_per_request: r3(t.floorCpuMs),
    loop_floor_responders_cpu_ms_per_request: r3(t.floorResponderCpuMs),
    loop_floor_client_cpu_ms_per_request: r3(t.floorClientCpuMs),
    gateway_rps_event_loop_tokenizer: Math.round(t.loopRps),
    // CPU, not rates (steadier on a shared machine): what one core of event loop serves
    // against what one core of tokenizer thread serves.
    tokenize_only_cpu_ms_per_request: r3(t.tokenizeOnlyCpuMs),
    event_loop_over_tokenizer_capacity: r3(t.tokenizeOnlyCpuMs / t.gatewayMainCpuMs),
    // Derived from CPU, not measured as rates (steadier when other jobs share the cores):
    // chats/s the gateway could serve with this machine's cores to itself (client and
    // responders elsewhere) — the least of three limits: the whole process (cores × 1000 /
    // its CPU ms per chat), its one main thread (1000 / main-thread ms per chat) and its
    // tokenizer threads (threads × 1000 / a tokenizer thread's ms per chat, taken as one
    // thread tokenizing alone) — and that over what one thread tokenizing alone serves
    // (1000 / its CPU ms per chat). Cores are `os.availableParallelism()`: neither it nor
    // `os.cpus()` sees a cgroup CPU quota, so in a limited container this overstates.
    // The target is the measured `gateway_over_tokenize_only`, not this.
    gateway_capacity_rps: Math.round(capacityRps(t)),
    gateway_capacity_over_tokenize_only: r3((capacityRps(t) * t.tokenizeOnlyCpuMs) / 1000),
    throughput_rounds: t.rounds,
    direct_responders_rps: Math.round(t.directRps),
    responders: RESPONDERS,
    loop_gateway_cpu_ms_per_request: r3(t.gatewayCpuMs),
    loop_gateway_main_thread_cpu_ms_per_request: r3(t.gatewayMainCpuMs),
    loop_gateway_other_threads_cpu_ms_per_request: t.otherThreadsCpuMs.map(r3),
    loop_event_loop_tokenizer_gateway_cpu_ms_per_request: r3(t.loopGatewayCpuMs),
    loop_responders_cpu_ms_per_request: r3(t.responderCpuMs),
    loop_client_cpu_ms_per_request: r3(t.clientCpuMs),
    // The gateway's young-generation collections over the loop: how many per chat, and
    // their pause on the main thread per chat (ms).
    loop_gateway_scavenges_per_request: r3(t.scavengesPerChat),
    loop_gateway_scavenge_ms_per_request: r3(t.scavengeMsPerChat),
    loop_gateway_major_gcs_per_request: r3(t.majorGcsPerChat),
    loop_gateway_major_gc_ms_per_request: r3(t.majorGcMsPerChat),
  };
}

/** `--only throughput`: the chat loops in front of the responders, and tokenization alone. */
async function throughputOnly(): Promise<void> {
  try {
    const hs = Array.from({ length: 16 }, (_, i) => history(HISTORY_FIRST_ID + i, PROMPT_TOKENS));
    const t = await throughputRounds(hs);
    const out = {
      bench: "gateway-throughput",
      ...throughputFields(t),
      loadavg_1m: r3(loadavg()[0]!),
    };
    process.stdout.write(`${floorLine(out)}\n${JSON.stringify(out)}\n`);
  } finally {
    await agent.close();
  }
}

/** The human line for the floor proxy's round of the chat loop. */
function floorLine(out: ReturnType<typeof throughputFields>): string {
  const r = out.throughput_rounds;
  return `closed loop, ${CONCURRENCY} clients, ${RESPONDERS} low-CPU responders, bare floor proxy (dispatch, round-robin): ${out.floor_rps} chats/s (rounds ${r.floor.join(" / ")}; gateway ${r.pool.join(" / ")}; tokenization alone ${r.tokenize_only.join(" / ")}); floor ${out.floor_over_tokenize_only} × tokenization-only (gateway ${out.gateway_over_tokenize_only} ×); CPU per chat: floor proxy ${out.loop_floor_cpu_ms_per_request} ms (gateway ${out.loop_gateway_cpu_ms_per_request}), responders ${out.loop_floor_responders_cpu_ms_per_request} ms, client ${out.loop_floor_client_cpu_ms_per_request} ms`;
}

async function main(): Promise<void> {
  const group = new ChildGroup(profArgs());
  let stopFloor = () => {};
  const fleet = await launchFleet(
    group,
    1,
    {
      prefillTokensPerS: 1e9,
      decodeMsPerToken: 0.5,
      numGpuBlocks: 32768,
      blockSize: 16,
      maxNumSeqs: 256,
    },
    1,
    false,
    ROUTER_NODE_OPTIONS,
  );
  try {
    const worker = fleet.workers[0]!.url;
    const gateway = fleet.routerUrl;
    process.stderr.write(`gateway ${gateway} (pid ${fleet.routerPid}), worker ${worker}\n`);
    for (let i = 0; i < 50; i++) {
      const p = body(prompt(PROMPT_TOKENS));
      await complete(worker, p);
      await complete(gateway, p);
    }

    const floorProcs: Awaited<ReturnType<typeof spawnFloor>>["proc"][] = [];
    stopFloor = () => {
      for (const f of floorProcs) f.kill("SIGTERM");
    };
    const startFloor = async (mode: "request" | "dispatch") => {
      const { url, pid, proc } = await spawnFloor([worker], mode);
      floorProcs.push(proc);
      for (let i = 0; i < 50; i++) await complete(url, body(prompt(PROMPT_TOKENS)));
      return { url, pid };
    };
    const floorProc = await startFloor("request");
    const floor = floorProc.url;
    const leanFloor = (await startFloor("dispatch")).url;

    // Each prompt goes down every path, the order rotating (the worker caches it after
    // the first: each path comes first as often).
    const paths = [worker, gateway, floor, leanFloor];
    const times: number[][] = paths.map(() => []);
    const own: number[] = [];
    const gcBefore = await collections(gateway);
    for (let i = 0; i < PAIRS; i++) {
      const p = body(prompt(PROMPT_TOKENS));
      for (let k = 0; k < paths.length; k++) {
        const j = (i + k) % paths.length;
        times[j]!.push(await complete(paths[j]!, p, "/v1/completions", own));
      }
    }
    const [direct, via, viaFloor, viaLean] = times as [number[], number[], number[], number[]];
    const gcPart1 = gcDelta(gcBefore, await collections(gateway), "minor");
    const firstByte = {
      direct_first_byte_p50_ms: r3(pct(direct, 0.5)),
      direct_first_byte_p99_ms: r3(pct(direct, 0.99)),
      gateway_first_byte_p50_ms: r3(pct(via, 0.5)),
      gateway_first_byte_p99_ms: r3(pct(via, 0.99)),
      added_p50_ms: r3(pct(via, 0.5) - pct(direct, 0.5)),
      added_p99_ms: r3(pct(via, 0.99) - pct(direct, 0.99)),
      floor_first_byte_p50_ms: r3(pct(viaFloor, 0.5)),
      floor_first_byte_p99_ms: r3(pct(viaFloor, 0.99)),
      floor_added_p50_ms: r3(pct(viaFloor, 0.5) - pct(direct, 0.5)),
      floor_added_p99_ms: r3(pct(viaFloor, 0.99) - pct(direct, 0.99)),
      lean_floor_added_p50_ms: r3(pct(viaLean, 0.5) - pct(direct, 0.5)),
      lean_floor_added_p99_ms: r3(pct(viaLean, 0.99) - pct(direct, 0.99)),
      gateway_over_floor_p50_ms: r3(pct(via, 0.5) - pct(viaFloor, 0.5)),
      gateway_over_floor_p99_ms: r3(pct(via, 0.99) - pct(viaFloor, 0.99)),
      gateway_own_p50_ms: r3(pct(own, 0.5)),
      gateway_own_p99_ms: r3(pct(own, 0.99)),
      // The gateway's young-generation collections over part 1 (its requests, and the
      // KV events of every path's requests): how many, and their pauses' total (ms).
      first_byte_gateway_scavenges: gcPart1.count,
      first_byte_gateway_scavenge_ms: r3(gcPart1.s * 1000),
    };
    if (ONLY === "first-byte") {
      const out = {
        bench: "gateway-first-byte",
        pairs: PAIRS,
        ...firstByte,
        loadavg_1m: r3(loadavg()[0]!),
      };
      process.stdout.write(`${JSON.stringify(out)}\n`);
      return;
    }
    const floorCpuBefore = cpuSeconds(floorProc.pid);
    for (let i = 0; i < CPU_REQUESTS; i++) await complete(floor, body(prompt(PROMPT_TOKENS)));
    const floorCpu = ((cpuSeconds(floorProc.pid) - floorCpuBefore) * 1000) / CPU_REQUESTS;

    const cpuRun = async (n: number, count: number) => {
      const payloads = Array.from({ length: count }, () => body(prompt(n)));
      const before = cpuSeconds(fleet.routerPid);
      for (const p of payloads) await complete(gateway, p);
      // Let the last requests' KV events be ingested: they are part of the cost.
      await new Promise((r) => setTimeout(r, 300));
      return ((cpuSeconds(fleet.routerPid) - before) * 1000) / count;
    };
    const cpu8k = await cpuRun(PROMPT_TOKENS, CPU_REQUESTS);
    const cpu100k = await cpuRun(100_000, CPU_REQUESTS_100K);

    const gatewayIdsRps = await closedLoop(gateway, DURATION_S, PROMPT_TOKENS);
    const directRps = await closedLoop(worker, DURATION_S, PROMPT_TOKENS);

    // Chats: histories sent once (the gateway sees them), then new last user turns.
    const chat = (m: readonly ChatMessage[]) =>
      complete(gateway, chatBody(m), "/v1/chat/completions");
    const seen = async (tokens: number, count: number) => {
      const hs = Array.from({ length: count }, (_, i) => history(500 + i + tokens, tokens));
      for (const h of hs) await chat(withNewTurn(h));
      return hs;
    };
    const chatCpu = async (hs: readonly ChatMessage[][], perHistory: number) => {
      const bodies = hs.flatMap((h) => Array.from({ length: perHistory }, () => withNewTurn(h)));
      const before = cpuSeconds(fleet.routerPid);
      for (const m of bodies) await chat(m);
      await new Promise((r) => setTimeout(r, 300));
      return ((cpuSeconds(fleet.routerPid) - before) * 1000) / bodies.length;
    };
    const hs8k = await seen(PROMPT_TOKENS, 16);
    const cpuChat8k = await chatCpu(hs8k, 4);
    const hs100k = await seen(100_000, 4);
    const cpuChat100k = await chatCpu(hs100k, 3);
    const cold100k = Array.from({ length: 6 }, (_, i) => withNewTurn(history(9000 + i, 100_000)));
    const coldBefore = cpuSeconds(fleet.routerPid);
    for (const m of cold100k) await chat(m);
    await new Promise((r) => setTimeout(r, 300));
    const cpuChat100kCold = ((cpuSeconds(fleet.routerPid) - coldBefore) * 1000) / cold100k.length;
    const chatEnd = performance.now() + DURATION_S * 1000;
    let chats = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async (_, c) => {
        for (let i = c; performance.now() < chatEnd; i += CONCURRENCY) {
          await chat(withNewTurn(hs8k[i % hs8k.length]!));
          chats++;
        }
      }),
    );
    const gatewaySimRps = chats / DURATION_S;
    // Latencies of tokenization alone (this process), then the throughput rounds.
    const tok = await tokenizeFigures(PROMPT_TOKENS, DURATION_S);
    const fast = await throughputRounds(hs8k);

    const out = {
      bench: "gateway",
      prompt: `${PROMPT_TOKENS} token ids, streaming, max_tokens ${MAX_TOKENS}`,
      pairs: PAIRS,
      ...firstByte,
      floor_cpu_ms_per_request: r3(floorCpu),
      tokenizer_load_ms: tok.load_ms,
      chat_prompt_tokens: tok.prompt_tokens,
      tokenize_p50_ms: tok.tokenize_p50_ms,
      tokenize_p99_ms: tok.tokenize_p99_ms,
      tokenize_cold_p50_ms: tok.tokenize_cold_p50_ms,
      tokenize_cold_p99_ms: tok.tokenize_cold_p99_ms,
      render_p50_ms: tok.render_p50_ms,
      render_p99_ms: tok.render_p99_ms,
      // Tokenization alone measured in this process (as `tokenize_only_rps` was before
      // 2026-12-02): this process's state moves it by a quarter either way.
      tokenize_only_rps_this_process: tok.tokenize_only_rps,
      ...throughputFields(fast),
      gateway_sim_chat_rps: Math.round(gatewaySimRps),
      gateway_ids_rps: Math.round(gatewayIdsRps),
      direct_rps: Math.round(directRps),
      concurrency: CONCURRENCY,
      cpu_ms_per_request_8k: r3(cpuChat8k),
      cpu_ms_per_request_100k: r3(cpuChat100k),
      cpu_ms_per_request_100k_cold: r3(cpuChat100kCold),
      cpu_ms_per_request_8k_ids: r3(cpu8k),
      cpu_ms_per_request_100k_ids: r3(cpu100k),
      loadavg_1m: r3(loadavg()[0]!),
    };
    process.stdout.write(
      [
        `first byte, ${PROMPT_TOKENS}-token prompt (ms) p50      p99`,
        `  direct to the worker          ${out.direct_first_byte_p50_ms.toFixed(3).padStart(7)}  ${out.direct_first_byte_p99_ms.toFixed(3).padStart(7)}`,
        `  through the gateway           ${out.gateway_first_byte_p50_ms.toFixed(3).padStart(7)}  ${out.gateway_first_byte_p99_ms.toFixed(3).padStart(7)}`,
        `  added                         ${out.added_p50_ms.toFixed(3).padStart(7)}  ${out.added_p99_ms.toFixed(3).padStart(7)}`,
        `  through the floor proxy       ${out.floor_first_byte_p50_ms.toFixed(3).padStart(7)}  ${out.floor_first_byte_p99_ms.toFixed(3).padStart(7)}`,
        `  added by the floor            ${out.floor_added_p50_ms.toFixed(3).padStart(7)}  ${out.floor_added_p99_ms.toFixed(3).padStart(7)}`,
        `  added by the dispatch floor   ${out.lean_floor_added_p50_ms.toFixed(3).padStart(7)}  ${out.lean_floor_added_p99_ms.toFixed(3).padStart(7)}`,
        `  gateway over the floor        ${out.gateway_over_floor_p50_ms.toFixed(3).padStart(7)}  ${out.gateway_over_floor_p99_ms.toFixed(3).padStart(7)}`,
        `  gateway's own time (header)   ${out.gateway_own_p50_ms.toFixed(3).padStart(7)}  ${out.gateway_own_p99_ms.toFixed(3).padStart(7)}`,
        `gateway CPU per request, token ids: ${out.cpu_ms_per_request_8k_ids} ms (${PROMPT_TOKENS} tokens), ${out.cpu_ms_per_request_100k_ids} ms (100k tokens); floor proxy ${out.floor_cpu_ms_per_request} ms`,
        `gateway CPU per chat continuing a seen conversation: ${out.cpu_ms_per_request_8k} ms (${PROMPT_TOKENS} tokens), ${out.cpu_ms_per_request_100k} ms (100k); never seen 100k: ${out.cpu_ms_per_request_100k_cold} ms`,
        `tokenization alone (${out.chat_prompt_tokens}-token chat, new last turn): p50 ${out.tokenize_p50_ms} ms p99 ${out.tokenize_p99_ms} ms; cold p50 ${out.tokenize_cold_p50_ms} p99 ${out.tokenize_cold_p99_ms} ms; ${out.tokenize_only_rps} req/s on one thread in a fresh process (median of ${ROUNDS} rounds; ${tok.tokenize_only_rps}/s in this process; load ${out.tokenizer_load_ms} ms); chat-template render alone p50 ${out.render_p50_ms} p99 ${out.render_p99_ms} ms`,
        `closed loop, ${CONCURRENCY} clients, one simulated worker: ${out.gateway_sim_chat_rps} chats/s through the gateway (${out.gateway_ids_rps} req/s with token ids), ${out.direct_rps} req/s direct`,
        `closed loop, ${CONCURRENCY} clients, ${RESPONDERS} low-CPU responders: ${out.gateway_rps} chats/s through the gateway (${out.direct_responders_rps}/s direct to the responders); CPU per chat: gateway ${out.loop_gateway_cpu_ms_per_request} ms (main thread ${out.loop_gateway_main_thread_cpu_ms_per_request}), responders ${out.loop_responders_cpu_ms_per_request} ms, client ${out.loop_client_cpu_ms_per_request} ms; gateway ${out.gateway_over_tokenize_only} × tokenization-only (${out.tokenize_only_rps}/s, median of ${ROUNDS} rounds); tokenizing on the event loop: ${out.gateway_rps_event_loop_tokenizer} chats/s`,
        floorLine(out),
        `load average (1 min): ${out.loadavg_1m}`,
        JSON.stringify(out),
        "",
      ].join("\n"),
    );
  } finally {
    stopFloor();
    await fleet.cleanup();
    await group.stopAll();
    await agent.close();
  }
}

// `--only first-byte`: part 1 alone (paired runs of the first byte take about 40 s).
if (ONLY === "throughput") await throughputOnly();
else await main();

/** The gateway's chats/s by CPU: the least of its process, main-thread and tokenizer limits. */
function capacityRps(t: {
  gatewayCpuMs: number;
  gatewayMainCpuMs: number;
  tokenizeOnlyCpuMs: number;
}) {
  return Math.min(
    (availableParallelism() * 1000) / t.gatewayCpuMs,
    1000 / t.gatewayMainCpuMs,
    (TOKENIZER_THREADS * 1000) / t.tokenizeOnlyCpuMs,
  );
}
