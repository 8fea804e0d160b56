/**
 * A tiny custom engine that takes part in kvrouter's KV-aware routing: a toy prefix
 * cache (`toy-cache.ts`) runs a deterministic workload and reports every block it
 * stores or evicts to the router, in one of the two supported ways
 * (docs/custom-engines.md):
 *
 * - ZeroMQ (default): `KvEventPublisher` from `kvrouter/engine` sends vLLM's exact bytes
 *   on a PUB socket and serves replays; the router subscribes as to any vLLM worker.
 * - HTTP (`--router URL`): JSON batches to `POST /v1/workers/:id/events`, then its load
 *   as a `ForwardPassMetrics` body to `PUT /v1/workers/:id/load`.
 *
 * Run from a checkout:  npm run example:custom-engine -- [options]
 *   --endpoint tcp://127.0.0.1:5557   PUB address (`*` port: the OS picks one)
 *   --replay tcp://127.0.0.1:5558     replay ROUTER address
 *   --router http://127.0.0.1:8080    push over HTTP instead (registers --worker-id)
 *   --worker-id toy-0  --token T      the id to push as; the router's server.authToken
 *   --block-size 16  --capacity 64  --prompts 12
 *   --exit                            quit when the workload is done (ZeroMQ: default
 *                                     is to stay up, serving replays, until SIGINT/SIGTERM)
 *
 * It prints JSON lines: `{"ready": …}` with the bound endpoints, then `{"done": …}` with,
 * for each prompt, its token ids and how many of its leading blocks the cache still
 * holds (what the router's `/v1/match` should answer for this worker).
 */

import { parseArgs } from "node:util";
import { KvEventPublisher } from "kvrouter/engine";
import { type CacheEvents, ToyPrefixCache } from "./toy-cache.js";

const { values: o } = parseArgs({
  options: {
    endpoint: { type: "string", default: "tcp://127.0.0.1:5557" },
    replay: { type: "string", default: "tcp://127.0.0.1:5558" },
    router: { type: "string" },
    "worker-id": { type: "string", default: "toy-0" },
    token: { type: "string" },
    "block-size": { type: "string", default: "16" },
    capacity: { type: "string", default: "64" },
    prompts: { type: "string", default: "12" },
    exit: { type: "boolean", default: false },
  },
});

const blockSize = Number(o["block-size"]);
const capacity = Number(o.capacity);
const say = (line: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(line)}\n`);

/** Prompts sharing one of three 2-block "system prompts", each with its own question. */
function workload(n: number): number[][] {
  return Array.from({ length: n }, (_, i) => {
    const system = Array.from({ length: 2 * blockSize }, (_, t) => 1000 * (1 + (i % 3)) + t);
    const question = Array.from({ length: 2 * blockSize + 3 }, (_, t) => 50_000 + i * 97 + t);
    return [...system, ...question];
  });
}

/** HTTP: events of one prefill step form one batch, sent with the next event id. */
class HttpEvents implements CacheEvents {
  #eventId = 0;
  #batch: Record<string, unknown>[] = [];
  constructor(
    readonly base: string,
    readonly id: string,
    readonly headers: Record<string, string>,
  ) {}
  stored(hashes: bigint[], parent: bigint | null, tokenIds: number[]): void {
    this.#batch.push({
      type: "BlockStored",
      block_hashes: hashes.map(String), // 64-bit hashes as decimal strings (JSON numbers lose bits)
      parent_block_hash: parent === null ? null : String(parent),
      token_ids: tokenIds,
      block_size: blockSize,
      medium: "GPU",
    });
  }
  removed(hashes: bigint[]): void {
    this.#batch.push({ type: "BlockRemoved", block_hashes: hashes.map(String), medium: "GPU" });
  }
  async send(path: string, method: string, body: unknown): Promise<unknown> {
    const res = await fetch(`${this.base}${path}`, {
      method,
      headers: { "content-type": "application/json", ...this.headers },
      body: JSON.stringify(body),
    });
    const json = await res.json();
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  }
  async flush(): Promise<void> {
    if (this.#batch.length === 0) return;
    const events = this.#batch;
    this.#batch = [];
    await this.send(`/v1/workers/${this.id}/events`, "POST", { event_id: this.#eventId++, events });
  }
}

async function main(): Promise<void> {
  const prompts = workload(Number(o.prompts));
  const results: { token_ids: number[]; cached_blocks: number }[] = [];
  if (o.router !== undefined) {
    const headers: Record<string, string> =
      o.token === undefined ? {} : { authorization: `Bearer ${o.token}` };
    const sink = new HttpEvents(o.router.replace(/\/$/, ""), o["worker-id"], headers);
    // Register without an events endpoint: this worker's events come over HTTP.
    await sink.send("/v1/workers", "POST", {
      id: o["worker-id"],
      url: "http://127.0.0.1:1",
      metrics_url: null,
      block_size: blockSize,
    });
    say({ ready: { router: o.router, worker: o["worker-id"] } });
    const cache = new ToyPrefixCache(blockSize, capacity, sink);
    for (const p of prompts) {
      cache.prefill(p);
      await sink.flush();
    }
    await sink.send(`/v1/workers/${o["worker-id"]}/load`, "PUT", {
      worker_stats: { request_active_slots: 0, request_total_slots: 8, num_requests_waiting: 0 },
      kv_stats: { kv_active_blocks: cache.size, kv_total_blocks: capacity },
    });
    for (const p of prompts)
      results.push({ token_ids: p, cached_blocks: cache.cachedPrefixBlocks(p) });
    say({ done: { prompts: results } });
    return;
  }
  const publisher = await KvEventPublisher.bind({
    endpoint: o.endpoint,
    replayEndpoint: o.replay,
    blockSize,
  });
  say({ ready: { endpoint: publisher.endpoint, replay_endpoint: publisher.replayEndpoint } });
  const cache = new ToyPrefixCache(blockSize, capacity, {
    stored: (hashes, parent, tokenIds) => publisher.publishStored(hashes, parent, tokenIds),
    removed: (hashes) => publisher.publishRemoved(hashes),
  });
  for (const p of prompts) cache.prefill(p);
  await publisher.flush();
  for (const p of prompts)
    results.push({ token_ids: p, cached_blocks: cache.cachedPrefixBlocks(p) });
  say({ done: { prompts: results, batches: Number(publisher.nextSeq) } });
  if (o.exit) {
    await publisher.close();
    return;
  }
  // Stay up: the router may connect later and replay everything from seq 0.
  await new Promise<void>((resolve) => {
    process.once("SIGINT", resolve);
    process.once("SIGTERM", resolve);
  });
  await publisher.close();
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
