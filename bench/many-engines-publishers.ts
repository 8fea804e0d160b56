/**
 * The engine side of the many-engines benchmark, run as a child process
 * (`many-engines-bench.ts` forks a few): binds `count` EnginePublishers (PUB + replay
 * ROUTER on loopback, what vLLM opens per engine) and, per engine, an HTTP server
 * answering `/metrics` with a vLLM-shaped exposition of ~`metricsBytes`. Over IPC:
 * `load {perEngineHz, seconds}` → every engine publishes a 4-block `BlockStored` batch
 * at that rate (each chain continues the engine's last block), then reports;
 * `exit` → close everything.
 */

import { createServer } from "node:http";
import { EnginePublisher } from "../src/engine/publisher.js";

type Command = { cmd: "load"; perEngineHz: number; seconds: number } | { cmd: "exit" };

const [first, count, metricsBytes] = (process.argv[2] ?? "0,10,16384").split(",").map(Number) as [
  number,
  number,
  number,
];

function exposition(i: number): string {
  const L = `model_name="m",engine="${i}"`;
  const lines = [
    "# TYPE vllm:num_requests_running gauge",
    `vllm:num_requests_running{${L}} 3.0`,
    "# TYPE vllm:num_requests_waiting gauge",
    `vllm:num_requests_waiting{${L}} 0.0`,
    "# TYPE vllm:kv_cache_usage_perc gauge",
    `vllm:kv_cache_usage_perc{${L}} 0.42`,
    "# TYPE vllm:prefix_cache_queries counter",
    `vllm:prefix_cache_queries_total{${L}} 123456.0`,
    "# TYPE vllm:prefix_cache_hits counter",
    `vllm:prefix_cache_hits_total{${L}} 65432.0`,
    `vllm:cache_config_info{block_size="16",num_gpu_blocks="8192",${L}} 1.0`,
  ];
  // Histograms make up most of a real vLLM exposition.
  for (let h = 0; lines.join("\n").length < metricsBytes; h++) {
    lines.push(`# TYPE vllm:hist_${h}_seconds histogram`);
    for (const le of [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]) {
      lines.push(`vllm:hist_${h}_seconds_bucket{${L},le="${le}"} ${h * 7 + le}`);
    }
    lines.push(`vllm:hist_${h}_seconds_count{${L}} 99.0`, `vllm:hist_${h}_seconds_sum{${L}} 9.9`);
  }
  return `${lines.join("\n")}\n`;
}

async function main(): Promise<void> {
  if (process.send === undefined) throw new Error("run me through many-engines-bench.ts");
  process.on("disconnect", () => process.exit(0)); // the parent is gone
  const send = (msg: unknown) => process.send!(msg);
  const pubs: EnginePublisher[] = [];
  for (let i = 0; i < count; i++) {
    pubs.push(
      await EnginePublisher.bind({
        endpoint: "tcp://127.0.0.1:*",
        replayEndpoint: "tcp://127.0.0.1:*",
        bufferSteps: 1000,
      }),
    );
  }
  // One HTTP server per engine, as in a real fleet (each engine its own origin).
  const servers = pubs.map((_, i) => {
    const body = exposition(first + i);
    const server = createServer((req, res) => {
      if (req.url !== "/metrics") {
        res.writeHead(404).end();
        return;
      }
      res.writeHead(200, { "content-type": "text/plain; version=0.0.4" }).end(body);
    });
    server.keepAliveTimeout = 60_000;
    return server;
  });
  const ports: number[] = [];
  for (const server of servers) {
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const addr = server.address();
    ports.push(typeof addr === "object" && addr !== null ? addr.port : 0);
  }
  const last = pubs.map(() => null as bigint | null);
  let next = BigInt(first) * 1_000_000_000n + 1n;
  const tokens = Array.from({ length: 64 }, (_, j) => j + 1);

  process.on("message", async (msg: Command) => {
    if (msg.cmd === "exit") {
      for (const server of servers) server.close();
      await Promise.all(pubs.map((p) => p.close()));
      process.disconnect?.();
      return;
    }
    const periodMs = 1000 / msg.perEngineHz;
    const end = performance.now() + msg.seconds * 1000;
    let batches = 0;
    for (let tick = performance.now(); tick < end; tick += periodMs) {
      for (let i = 0; i < pubs.length; i++) {
        const hashes = [next, next + 1n, next + 2n, next + 3n];
        next += 4n;
        pubs[i]!.publish({
          ts: Date.now() / 1000,
          dpRank: 0,
          events: [
            {
              type: "BlockStored",
              blockHashes: hashes,
              parentHash: last[i]!,
              tokenIds: tokens,
              blockSize: 16,
              loraId: null,
              medium: "GPU",
              loraName: null,
            },
          ],
        });
        last[i] = hashes[3]!;
        batches++;
      }
      const wait = tick + periodMs - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    }
    await Promise.all(pubs.map((p) => p.flush()));
    send({ type: "loaded", batches });
  });
  send({
    type: "ready",
    engines: pubs.map((p, i) => ({
      events: p.endpoint,
      replay: p.replayEndpoint,
      metrics: `http://127.0.0.1:${ports[i]}/metrics`,
    })),
  });
}

void main();
