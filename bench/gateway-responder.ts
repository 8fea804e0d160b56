/**
 * Cheap stand-ins for engines, for the throughput part of `bench:gateway`: one process
 * serving `--workers N` OpenAI-compatible HTTP endpoints on loopback, each with its own
 * ZeroMQ KV-event publisher, doing as little CPU work as an HTTP server can so that the
 * gateway, not the engines, is what saturates the 2 shared cores.
 *
 * Per request: the body is not parsed, a short streaming answer goes back (`--chunks`
 * SSE chunks, then `[DONE]`; a JSON body when the request does not stream), and the KV
 * events an engine with prefix caching would publish for it, encoded without looking at
 * the prompt: `--tokens FILE` lists the workload's conversations (`{ key, ids }`: the
 * start of the first user turn as it appears in a request body, and the history's token
 * ids as the gateway tokenizes them). A request whose conversation this endpoint has not
 * cached stores the whole history (its blocks); every request then stores the blocks of
 * its new turn (`--new-blocks`, token ids made up, chained to the history's last block)
 * and removes those of the request `--keep` requests earlier, as an engine evicts. So
 * the router ingests an engine's volume of events and finds real overlaps, while the
 * answer costs the responder almost nothing. Each endpoint also serves `/metrics`
 * (vLLM's gauges: running, waiting, KV usage, cache config) and `/v1/models`. HTTP is
 * served on bare sockets (`raw-http.ts`, `--http raw`, the default) or by `node:http`
 * (`--http node`, as before 2026-12-02): the same answers, framed the same way (chunked
 * SSE, a `content-length` otherwise), for less of the cores the gateway is measured on.
 *
 *   node --import tsx bench/gateway-responder.ts --workers 4 --tokens FILE [--http raw|node]
 *
 * Prints one JSON line per endpoint (`{ id, url, events }`), then `{ ready: true }`.
 */

import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { EnginePublisher } from "../src/engine/publisher.js";
import { encodeEventBatch, type WireEvent } from "../src/protocol/event-encoder.js";
import { rawServer } from "./raw-http.js";

const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1]! : fallback;
};
const WORKERS = Number(arg("workers", "4"));
const CHUNKS = Number(arg("chunks", "4"));
const BLOCK_SIZE = Number(arg("block-size", "16"));
const NEW_BLOCKS = Number(arg("new-blocks", "14"));
const KEEP = Number(arg("keep", "64"));
const MODEL = arg("model", "sim-model");
/** `--http raw` (default: `raw-http.ts`, the least CPU per answer) or `node` (`node:http`). */
const HTTP = arg("http", "raw");
if (HTTP !== "raw" && HTTP !== "node") throw new Error("--http: raw or node");
const conversations = JSON.parse(readFileSync(arg("tokens", ""), "utf8")) as {
  key: string;
  ids: number[];
}[];
const byKey = new Map(conversations.map((c, i) => [c.key, i]));
const KEY_CHARS = conversations[0]?.key.length ?? 0;
/** Where the first user turn's text starts in a body written by `JSON.stringify`. */
const USER_TURN = Buffer.from('{"role":"user","content":"');

const stored = (hashes: bigint[], parent: bigint | null, tokenIds: number[]): WireEvent => ({
  type: "BlockStored",
  blockHashes: hashes,
  parentHash: parent,
  tokenIds,
  blockSize: BLOCK_SIZE,
  loraId: null,
  medium: "GPU",
  loraName: null,
});

/** Per endpoint: which conversations it caches, and its new-turn blocks still cached. */
class EngineCache {
  readonly #cached = new Set<number>();
  readonly #history: bigint[][];
  readonly #recent: bigint[][] = [];
  #next = 1n;

  constructor(readonly worker: number) {
    this.#history = conversations.map((c, h) =>
      Array.from(
        { length: Math.floor(c.ids.length / BLOCK_SIZE) },
        (_, b) => (BigInt(worker + 1) << 48n) | (BigInt(h + 1) << 24n) | BigInt(b + 1),
      ),
    );
  }

  /** The encoded batch for one request of conversation `h` (-1: unknown). */
  events(h: number): Uint8Array {
    const events: WireEvent[] = [];
    let parent: bigint | null = null;
    if (h >= 0) {
      const blocks = this.#history[h]!;
      if (!this.#cached.has(h)) {
        this.#cached.add(h);
        events.push(
          stored(blocks, null, conversations[h]!.ids.slice(0, blocks.length * BLOCK_SIZE)),
        );
      }
      parent = blocks.at(-1) ?? null;
    }
    const fresh = Array.from(
      { length: NEW_BLOCKS },
      () => (BigInt(this.worker + 1) << 48n) | this.#next++,
    );
    const ids = Array.from(
      { length: NEW_BLOCKS * BLOCK_SIZE },
      (_, i) => 1000 + ((i * 7919 + Number(this.#next)) % 50000),
    );
    events.push(stored(fresh, parent, ids));
    this.#recent.push(fresh);
    if (this.#recent.length > KEEP) {
      events.push({ type: "BlockRemoved", blockHashes: this.#recent.shift()!, medium: "GPU" });
    }
    return encodeEventBatch({ ts: Date.now() / 1000, events, dpRank: 0 });
  }
}

/** The conversation a chat body belongs to (-1 when none of the workload's). */
function conversationOf(body: Buffer): number {
  const at = body.indexOf(USER_TURN);
  if (at < 0) return -1;
  const start = at + USER_TURN.length;
  return byKey.get(body.toString("utf8", start, start + KEY_CHARS)) ?? -1;
}

function chunk(i: number, chat: boolean): string {
  const choice = chat
    ? `{"index":0,"delta":{"content":"t${i}"},"finish_reason":null}`
    : `{"index":0,"text":"t${i}","finish_reason":null}`;
  return `data: {"id":"r","object":"${chat ? "chat.completion.chunk" : "text_completion"}","created":0,"model":"${MODEL}","choices":[${choice}]}\n\n`;
}
const STREAM = {
  chat: Array.from({ length: CHUNKS }, (_, i) => chunk(i, true)),
  completion: Array.from({ length: CHUNKS }, (_, i) => chunk(i, false)),
};

/** What an answer is written through: the raw server's reply, or `node:http`'s behind an adapter. */
interface Reply {
  send(status: number, contentType: string, body: string): void;
  start(status: number, contentType: string): void;
  write(data: string): void;
  end(data?: string): void;
}

function nodeReply(res: ServerResponse): Reply {
  return {
    send(status, contentType, body) {
      res.writeHead(status, { "content-type": contentType });
      res.end(body);
    },
    start(status, contentType) {
      res.writeHead(status, { "content-type": contentType });
    },
    write: (data) => void res.write(data),
    end: (data) => void res.end(data),
  };
}

async function endpoint(worker: number) {
  const publisher = await EnginePublisher.bind({
    endpoint: "tcp://127.0.0.1:*",
    topic: "kv-events",
  });
  const cache = new EngineCache(worker);
  let running = 0;
  const metrics = () =>
    [
      `vllm:num_requests_running{model_name="${MODEL}"} ${running}`,
      `vllm:num_requests_waiting{model_name="${MODEL}"} 0`,
      `vllm:kv_cache_usage_perc{model_name="${MODEL}"} 0.1`,
      `vllm:cache_config_info{block_size="${BLOCK_SIZE}",num_gpu_blocks="32768"} 1.0`,
      "",
    ].join("\n");
  const handle = (method: string, url: string, body: Buffer, reply: Reply) => {
    if (method === "GET") {
      if (url === "/metrics") reply.send(200, "text/plain; version=0.0.4", metrics());
      else if (url === "/v1/models") {
        reply.send(
          200,
          "application/json",
          JSON.stringify({ object: "list", data: [{ id: MODEL, object: "model" }] }),
        );
      } else reply.send(200, "text/plain", "");
      return;
    }
    const chat = url === "/v1/chat/completions";
    running++;
    publisher.publishRaw(cache.events(chat ? conversationOf(body) : -1));
    // `"stream":true` as the gateway forwards the client's bytes; no JSON parse.
    if (!body.includes('"stream":true')) {
      reply.send(
        200,
        "application/json",
        `{"id":"r","object":"text_completion","model":"${MODEL}","choices":[]}`,
      );
      running--;
      return;
    }
    reply.start(200, "text/event-stream");
    const parts = chat ? STREAM.chat : STREAM.completion;
    let i = 0;
    const step = () => {
      if (i < parts.length) {
        reply.write(parts[i++]!);
        setImmediate(step);
        return;
      }
      reply.end("data: [DONE]\n\n");
      running--;
    };
    step();
  };
  const server =
    HTTP === "raw"
      ? rawServer((req, reply) => handle(req.method, req.url, req.body, reply))
      : createServer((req: IncomingMessage, res: ServerResponse) => {
          const parts: Buffer[] = [];
          req.on("data", (c: Buffer) => parts.push(c));
          req.on("end", () =>
            handle(req.method ?? "GET", req.url ?? "/", Buffer.concat(parts), nodeReply(res)),
          );
        });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return { id: `fast-${worker}`, url: `http://127.0.0.1:${port}`, events: publisher.endpoint };
}

for (let w = 0; w < WORKERS; w++) {
  process.stdout.write(`${JSON.stringify(await endpoint(w))}\n`);
}
process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
process.on("SIGTERM", () => process.exit(0));
