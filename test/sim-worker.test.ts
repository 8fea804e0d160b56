/**
 * The simulated vLLM worker over real HTTP and real ZeroMQ on loopback: OpenAI-shaped
 * completions (streamed and whole), prefix-cache reuse, /tokenize, /metrics, 4xx answers,
 * and the KV events a router would receive. Plus the CLI: bad flags and SIGTERM.
 */

import { spawn } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Dealer, Subscriber } from "zeromq";
import type { EventBatch, KvEvent } from "../src/protocol/events.js";
import { decodeEventBatch } from "../src/protocol/vllm-codec.js";
import { parseSimArgs, type SimWorkerConfig } from "../src/sim/sim-config.js";
import { type SimWorkerHandle, startSimWorker } from "../src/sim/sim-worker.js";
import { waitFor } from "./zmq-helpers.js";

// biome-ignore lint/suspicious/noExplicitAny: response bodies are parsed JSON, checked by the assertions
type Json = any;

function config(extra: string[] = []): SimWorkerConfig {
  const c = parseSimArgs([
    "--port",
    "0",
    "--events-port",
    "0",
    "--replay-port",
    "0",
    "--num-gpu-blocks",
    "17",
    "--block-size",
    "4",
    "--max-model-len",
    "64",
    "--prefill-tokens-per-s",
    "200000",
    "--decode-ms-per-token",
    "1",
    "--model",
    "sim-test",
    "--topic",
    "kv-events",
    "--seed",
    "42",
    ...extra,
  ]);
  if (c === "help") throw new Error("unexpected help");
  return c;
}

async function post(
  w: SimWorkerHandle,
  path: string,
  body: unknown,
): Promise<{ status: number; json: Json }> {
  const res = await fetch(`${w.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text === "" ? null : JSON.parse(text) };
}

/** POST with stream: true and return the parsed `data:` payloads (the last is "[DONE]"). */
async function postStream(w: SimWorkerHandle, path: string, body: object): Promise<unknown[]> {
  const res = await fetch(`${w.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ ...body, stream: true }),
  });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
  const text = await res.text();
  return text
    .split("\n\n")
    .filter((s) => s.length > 0)
    .map((s) => {
      expect(s.startsWith("data: ")).toBe(true);
      const data = s.slice(6);
      return data === "[DONE]" ? data : JSON.parse(data);
    });
}

const PROMPT =
  "The quick brown fox jumps over the lazy dog, then rests under an old oak tree by the river.";

describe("sim-worker HTTP API", () => {
  let w: SimWorkerHandle;
  beforeAll(async () => {
    w = await startSimWorker(config());
  });
  afterAll(async () => {
    await w?.close();
  });

  it("answers completions and reuses the prefix of a repeated prompt", async () => {
    const first = await post(w, "/v1/completions", {
      model: "sim-test",
      prompt: PROMPT,
      max_tokens: 5,
    });
    expect(first.status).toBe(200);
    expect(first.json).toMatchObject({ object: "text_completion", model: "sim-test" });
    expect(first.json.id).toMatch(/^cmpl-/);
    const choice = first.json.choices[0];
    expect(choice.finish_reason).toBe("length");
    expect(choice.text.length).toBeGreaterThan(0);
    const usage = first.json.usage;
    expect(usage.completion_tokens).toBe(5);
    expect(usage.total_tokens).toBe(usage.prompt_tokens + 5);
    expect(usage.prompt_tokens_details.cached_tokens).toBe(0);

    const again = await post(w, "/v1/completions", { prompt: PROMPT, max_tokens: 5 });
    expect(again.json.choices[0].text).toBe(choice.text); // deterministic
    const expected = Math.floor((usage.prompt_tokens - 1) / 4) * 4;
    expect(again.json.usage.prompt_tokens_details.cached_tokens).toBe(expected);

    // The same prompt as token ids hits the same blocks.
    const tok = await post(w, "/tokenize", { prompt: PROMPT });
    expect(tok.json.count).toBe(usage.prompt_tokens);
    const ids = await post(w, "/v1/completions", { prompt: tok.json.tokens, max_tokens: 5 });
    expect(ids.json.usage.prompt_tokens_details.cached_tokens).toBe(expected);
    expect(ids.json.choices[0].text).toBe(choice.text);
  });

  it("streams completions and chat as SSE chunks ending with [DONE]", async () => {
    const whole = await post(w, "/v1/completions", { prompt: "stream me", max_tokens: 4 });
    const chunks = await postStream(w, "/v1/completions", {
      prompt: "stream me",
      max_tokens: 4,
      stream_options: { include_usage: true },
    });
    expect(chunks.at(-1)).toBe("[DONE]");
    const objs = chunks.slice(0, -1) as Json[];
    const usage = objs.at(-1);
    expect(usage.choices).toEqual([]);
    expect(usage.usage.completion_tokens).toBe(4);
    const texts = objs
      .slice(0, -1)
      .map((c) => c.choices[0].text)
      .join("");
    expect(texts).toBe(whole.json.choices[0].text);
    expect(objs.at(-2).choices[0].finish_reason).toBe("length");

    const messages = [
      { role: "system", content: "You are terse." },
      { role: "user", content: [{ type: "text", text: "Say something." }] },
    ];
    const chat = await post(w, "/v1/chat/completions", { messages, max_completion_tokens: 3 });
    expect(chat.status).toBe(200);
    expect(chat.json.object).toBe("chat.completion");
    expect(chat.json.choices[0].message.role).toBe("assistant");
    const tok = await post(w, "/tokenize", { messages });
    expect(tok.json.count).toBe(chat.json.usage.prompt_tokens);
    expect(tok.json.max_model_len).toBe(64);

    const chatChunks = (await postStream(w, "/v1/chat/completions", {
      messages,
      max_tokens: 3,
    })) as Json[];
    expect(chatChunks.at(-1)).toBe("[DONE]");
    expect(chatChunks[0].object).toBe("chat.completion.chunk");
    expect(chatChunks[0].choices[0].delta.role).toBe("assistant");
    const content = chatChunks
      .slice(0, -1)
      .map((c) => c.choices[0].delta.content)
      .join("");
    expect(content).toBe(chat.json.choices[0].message.content);
  });

  it("exposes vLLM's metric names with model_name and engine labels", async () => {
    const res = await fetch(`${w.url}/metrics`);
    expect(res.headers.get("content-type")).toMatch(/^text\/plain/);
    const text = await res.text();
    const value = (name: string) => {
      const m = new RegExp(`^${name}\\{[^}]*\\} (\\S+)$`, "m").exec(text);
      return m === null ? null : Number(m[1]);
    };
    expect(value("vllm:num_requests_running")).toBe(0);
    expect(value("vllm:num_requests_waiting")).toBe(0);
    expect(value("vllm:kv_cache_usage_perc")).toBe(0);
    expect(value("vllm:prefix_cache_queries_total")).toBeGreaterThan(0);
    expect(value("vllm:prefix_cache_hits_total")).toBeGreaterThan(0);
    expect(text).toMatch(/^vllm:num_requests_running\{engine="0",model_name="sim-test"\} 0\.0$/m);
    expect(text).toMatch(
      /^vllm:cache_config_info\{.*block_size="4".*num_gpu_blocks="17".*\} 1\.0$/m,
    );
    expect(value("vllm:time_to_first_token_seconds_count")).toBeGreaterThan(0);
    expect((await fetch(`${w.url}/health`)).status).toBe(200);
  });

  it("aborts a streamed request whose client goes away and frees its blocks", async () => {
    // Its own slow worker (1 s per token), so the request is surely still running.
    const slow = await startSimWorker(
      config(["--decode-ms-per-token", "1000", "--events-port", "off", "--replay-port", "off"]),
    );
    try {
      const gauge = async (name: string) => {
        const text = await (await fetch(`${slow.url}/metrics`)).text();
        return Number(new RegExp(`^${name}\\{[^}]*\\} (\\S+)$`, "m").exec(text)![1]);
      };
      const ac = new AbortController();
      const res = await fetch(`${slow.url}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ prompt: "a long story please", max_tokens: 40, stream: true }),
        signal: ac.signal,
      });
      const reader = res.body!.getReader();
      await reader.read(); // the first chunk: the request is running
      expect(await gauge("vllm:num_requests_running")).toBe(1);
      expect(await gauge("vllm:kv_cache_usage_perc")).toBeGreaterThan(0);
      ac.abort();
      await waitFor("the aborted request to stop", () => slow.engine.counters().running === 0);
      expect(await gauge("vllm:kv_cache_usage_perc")).toBe(0);
      expect(slow.engine.counters().generationTokens).toBe(1);
    } finally {
      await slow.close();
    }
  });

  it("answers bad requests with 4xx saying what is wrong", async () => {
    const cases: [string, unknown, number, RegExp][] = [
      ["/v1/completions", "{not json", 400, /JSON/],
      ["/v1/completions", {}, 400, /'prompt' is required/],
      ["/v1/completions", { prompt: "x", max_tokens: 0 }, 400, /'max_tokens' must be an integer/],
      ["/v1/completions", { prompt: [1, -2] }, 400, /'prompt' must be/],
      ["/v1/completions", { prompt: ["a", "b"] }, 400, /one prompt per request/],
      ["/v1/completions", { prompt: "x", n: 2 }, 400, /'n' must be 1/],
      ["/v1/completions", { prompt: "x", model: "other" }, 404, /`other` does not exist/],
      ["/v1/completions", { prompt: "x", max_tokens: 100 }, 400, /maximum context length is 64/],
      ["/v1/chat/completions", { messages: [] }, 400, /'messages' must be a non-empty array/],
      ["/v1/chat/completions", { messages: [{ content: "x" }] }, 400, /messages\[0\]\.role/],
      ["/tokenize", { prompt: "a", messages: [] }, 400, /either 'prompt' or 'messages'/],
      ["/v1/nothing", {}, 404, /no route/],
    ];
    for (const [path, body, status, message] of cases) {
      const r = await post(w, path, body);
      expect(r.status, `${path} ${JSON.stringify(body)}`).toBe(status);
      expect(r.json.error.message).toMatch(message);
      expect(r.json.error.code).toBe(status);
    }
  });
});

function collect(sub: Subscriber, into: { seq: bigint; batch: EventBatch }[]): Promise<void> {
  return (async () => {
    for await (const [topic, seq, payload] of sub) {
      expect(topic!.toString()).toBe("kv-events");
      const d = decodeEventBatch(payload!);
      if (!d.ok) throw new Error(`undecodable batch: ${d.error.code}`);
      into.push({ seq: seq!.readBigUInt64BE(0), batch: d.batch });
    }
  })().catch(() => {});
}

describe("sim-worker KV events over ZeroMQ", () => {
  it("publishes BlockStored, then BlockRemoved when the small cache fills, and a reset", async () => {
    const w = await startSimWorker(config(["--data-parallel-rank", "2"]));
    const sub = new Subscriber({ linger: 0 });
    const got: { seq: bigint; batch: EventBatch }[] = [];
    try {
      sub.connect(w.eventsEndpoint!);
      sub.subscribe("kv-events");
      const done = collect(sub, got);
      // PUB/SUB joins asynchronously: send distinct prompts until the first batch arrives.
      for (let i = 0; got.length === 0; i++) {
        await post(w, "/v1/completions", {
          prompt: `warm up number ${i} of many words here`,
          max_tokens: 1,
        });
        await new Promise((r) => setTimeout(r, 20));
        if (i > 200) throw new Error("no KV event batch received");
      }
      // 16 usable blocks of 4 tokens: 12 distinct 8-block requests must evict.
      for (let i = 0; i < 12; i++) {
        const prompt = Array.from({ length: 30 }, (_, j) => 1000 * (i + 1) + j);
        const r = await post(w, "/v1/completions", { prompt, max_tokens: 2 });
        expect(r.status).toBe(200);
      }
      const events = (): KvEvent[] => got.flatMap((g) => g.batch.events);
      await waitFor("a BlockRemoved", () => events().some((e) => e.type === "removed"));
      const evs = events();
      const firstStored = evs.findIndex((e) => e.type === "stored");
      const firstRemoved = evs.findIndex((e) => e.type === "removed");
      expect(firstStored).toBeGreaterThanOrEqual(0);
      expect(firstStored).toBeLessThan(firstRemoved);
      const storedHashes = new Set<string>();
      for (const e of evs) {
        if (e.type === "stored") {
          expect(e.medium).toBe("GPU");
          expect(e.blockSize).toBe(4);
          expect(e.tokenIds.length).toBe(e.blockHashes.length * 4);
          if (e.parentHash !== null) expect(storedHashes.has(e.parentHash)).toBe(true);
          for (const h of e.blockHashes) storedHashes.add(h);
        } else if (e.type === "removed") {
          expect(e.blockHashes).toHaveLength(1);
        }
      }
      expect(got.every((g) => g.batch.dpRank === 2)).toBe(true);
      for (let i = 1; i < got.length; i++) expect(got[i]!.seq).toBe(got[i - 1]!.seq + 1n);

      // The replay socket serves the same batches from seq 0.
      const dealer = new Dealer({ linger: 0 });
      dealer.connect(w.replayEndpoint!);
      const start = Buffer.alloc(8);
      await dealer.send([Buffer.alloc(0), start]);
      let replayed = 0;
      for (;;) {
        const frames = await dealer.receive();
        if (frames[2]!.readBigUInt64BE(0) === 0xffffffffffffffffn) break;
        replayed++;
      }
      dealer.close();
      expect(BigInt(replayed)).toBe(w.publisher!.nextSeq);

      expect((await post(w, "/reset_prefix_cache", {})).status).toBe(200);
      await waitFor("AllBlocksCleared", () => events().at(-1)?.type === "cleared");
      sub.close();
      await done;
    } finally {
      sub.close();
      await w.close();
    }
  });
});

describe("kvrouter sim-worker command", () => {
  function run(args: string[], onReady?: (p: ReturnType<typeof spawn>) => void) {
    return new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
      const p = spawn(process.execPath, ["--import", "tsx", "src/cli.ts", "sim-worker", ...args], {
        stdio: ["ignore", "pipe", "pipe"],
      });
      let out = "";
      let err = "";
      p.stdout!.on("data", (d) => {
        out += d;
        if (onReady && out.includes("listening")) {
          onReady(p);
          onReady = undefined;
        }
      });
      p.stderr!.on("data", (d) => {
        err += d;
      });
      p.on("exit", (code, signal) => resolve({ code, out, err: `${err}${signal ?? ""}` }));
    });
  }

  it("names a bad flag and exits 2", async () => {
    const r = await run(["--block-size", "zero"]);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/--block-size must be an integer/);
  });

  it("closes its sockets and exits 0 on SIGTERM", async () => {
    const r = await run(["--port", "0", "--events-port", "0", "--replay-port", "0"], (p) =>
      p.kill("SIGTERM"),
    );
    expect(r.code, r.err).toBe(0);
    expect(JSON.parse(r.out.trim()).url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  });
});
