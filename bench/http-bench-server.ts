/**
 * The server side of `bench/http-bench.ts`, in its own process so the load generator
 * does not share its event loop or its CPU time: the real service with 16 workers and an
 * index of ~1M worker-blocks filled through `applyEvent` with vLLM-shaped events, and
 * the floor (a fastify route that only parses the JSON, with the service's parsing
 * options, so the two differ only by what the route does with the body). Writes the request bodies to
 * the file named by argv[2], prints one JSON line with the ports, runs until SIGTERM.
 */

import { writeFileSync } from "node:fs";
import Fastify from "fastify";
import { validateConfig } from "../src/config/index.js";
import { JSON_PARSING } from "../src/http/build-app.js";
import { engineHashFromU32Pair } from "../src/protocol/engine-hash.js";
import type { BlockStoredEvent } from "../src/protocol/events.js";
import { workerKey } from "../src/protocol/worker.js";
import { createService } from "../src/service/service.js";
import { createLogger } from "../src/telemetry/logger.js";

export const WORKERS = 16;
const BLOCK = 16;
const SYSTEM_PROMPTS = 64;
const SYSTEM_BLOCKS = 64; // 1,024-token system prompts
const CONTINUATION_BLOCKS = 192;
const TARGET_BLOCKS = 1_000_000;

function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const rand = prng(42);
const randomTokens = (n: number) => Array.from({ length: n }, () => Math.floor(rand() * 128_000));
const systemPrompts = Array.from({ length: SYSTEM_PROMPTS }, () =>
  randomTokens(SYSTEM_BLOCKS * BLOCK),
);

function stored(hashes: number[], parent: number | null, tokenIds: number[]): BlockStoredEvent {
  return {
    type: "stored",
    blockHashes: hashes.map((h) => engineHashFromU32Pair(0x5eed, h)),
    parentHash: parent === null ? null : engineHashFromU32Pair(0x5eed, parent),
    tokenIds,
    blockSize: BLOCK,
    loraId: null,
    loraName: null,
    medium: "GPU",
    tier: "gpu",
  };
}

async function main(): Promise<void> {
  const checked = validateConfig({
    server: { maxPromptTokens: 32_768 },
    inFlight: { ttlMs: 2000, prefillTtlMs: 1000 }, // nobody reports done in a benchmark
    log: { level: "warn" },
    workers: Array.from({ length: WORKERS }, (_, i) => ({
      id: `w${i}`,
      url: `http://127.0.0.1:${20000 + i}`,
      metricsUrl: null,
    })),
  });
  if (!checked.ok) throw new Error(JSON.stringify(checked.issues));
  const svc = await createService(checked.config, {
    logger: createLogger({ level: "warn" }),
    scrape: false,
  });

  // Fill: each worker gets a quarter of the system prompts and conversations on top.
  const t0 = performance.now();
  let hash = 1;
  let events = 0;
  const conversations: { worker: number; system: number; tokens: number[] }[] = [];
  const perWorker = TARGET_BLOCKS / WORKERS;
  for (let w = 0; w < WORKERS; w++) {
    const key = workerKey(`w${w}`);
    const lastSystemHash = new Map<number, number>();
    let blocks = 0;
    while (blocks < perWorker) {
      const s = (w + Math.floor(rand() * 4) * 16) % SYSTEM_PROMPTS;
      let parent = lastSystemHash.get(s);
      if (parent === undefined) {
        const hashes = Array.from({ length: SYSTEM_BLOCKS }, () => hash++);
        svc.index.applyEvent(key, stored(hashes, null, systemPrompts[s]!));
        parent = hashes[hashes.length - 1]!;
        lastSystemHash.set(s, parent);
        blocks += SYSTEM_BLOCKS;
        events++;
      }
      const tokens = randomTokens(CONTINUATION_BLOCKS * BLOCK);
      // vLLM reports a turn's new blocks as they fill: several events per conversation.
      for (let off = 0; off < CONTINUATION_BLOCKS; off += 32) {
        const hashes = Array.from({ length: 32 }, () => hash++);
        svc.index.applyEvent(
          key,
          stored(hashes, parent, tokens.slice(off * BLOCK, (off + 32) * BLOCK)),
        );
        parent = hashes[31]!;
        events++;
      }
      blocks += CONTINUATION_BLOCKS;
      conversations.push({ worker: w, system: s, tokens });
    }
  }
  const stats = svc.index.stats();
  const fillS = (performance.now() - t0) / 1000;
  for (let w = 0; w < WORKERS; w++) {
    await svc.app.inject({
      method: "PUT",
      url: `/v1/workers/w${w}/load`,
      payload: { running: w % 4, waiting: w % 3, kv_usage: 0.3 + w / 100 },
    });
  }
  await svc.app.listen({ host: "127.0.0.1", port: 0 });

  const floor = Fastify({ bodyLimit: checked.config.server.bodyLimitBytes, ...JSON_PARSING });
  floor.removeContentTypeParser("text/plain");
  floor.post("/floor", async (req) => ({
    tokens: (req.body as { token_ids: number[] }).token_ids.length,
  }));
  await floor.listen({ host: "127.0.0.1", port: 0 });

  // Bodies: a conversation's prefix (system prompt + part of its history) + new tokens.
  const bodies = (promptTokens: number) =>
    Array.from({ length: 32 }, (_, i) => {
      const c = conversations[(i * 7919) % conversations.length]!;
      const history = [...systemPrompts[c.system]!, ...c.tokens];
      const reuse = Math.min(history.length, Math.floor(promptTokens * 0.75));
      const tokens = [...history.slice(0, reuse), ...randomTokens(promptTokens - reuse)];
      return JSON.stringify({ token_ids: tokens });
    });

  const bodiesFile = process.argv[2];
  if (bodiesFile === undefined) throw new Error("usage: http-bench-server.ts BODIES_FILE");
  writeFileSync(bodiesFile, JSON.stringify({ 1024: bodies(1024), 8192: bodies(8192) }));
  const port = (app: { server: { address(): unknown } }) =>
    (app.server.address() as { port: number }).port;
  // The fill left ~100 MB of garbage: collect it now rather than during the first case.
  (globalThis as { gc?: () => void }).gc?.();
  process.stdout.write(
    `${JSON.stringify({
      routePort: port(svc.app),
      floorPort: port(floor),
      workerBlocks: stats.workerBlocks,
      nodes: stats.nodes,
      events,
      fillS,
    })}\n`,
  );
  process.once("SIGTERM", () => {
    void Promise.all([floor.close(), svc.close()]).then(() => process.exit(0));
  });
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
