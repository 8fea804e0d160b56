/**
 * The gateway's tokenizers on real HTTP: a local Qwen3 tokenizer (`gateway.tokenizers`, the
 * bundled model directory) in front of a simulated worker started with `--tokenizer` on
 * the same files; the remote mode (the worker's `/tokenize`); a worker without `/tokenize`
 * (routed on load, counted, still served); a bad directory failing at start-up. A repeated
 * chat is predicted cached and the engine agrees within one block.
 */

import { afterEach, describe, expect, it } from "vitest";
import { bundledQwen3Dir, type LocalTokenizer, loadModelTokenizer } from "../src/tokenize/index.js";
import {
  metricValue,
  plainEntry,
  type RunningGateway,
  simEntry,
  startGateway,
  startScripted,
  startSim,
  until,
} from "./gateway-harness.js";
import { closersAfterEach, startTestService } from "./http-harness.js";

const DIR = bundledQwen3Dir();
const BLOCK = 16;

const cleanup = closersAfterEach();

const SYSTEM =
  "You are a careful assistant for a team running an inference fleet. Answer briefly, " +
  "name the configuration key you mean, and say when you are unsure. ".repeat(6);
const CHAT = {
  model: "sim-model",
  max_tokens: 2,
  messages: [
    { role: "system", content: SYSTEM },
    { role: "user", content: "How do I check that the router's block size matches vLLM's?" },
    { role: "assistant", content: "Compare --block-size with the router's index.blockSize." },
    { role: "user", content: "And the hash seed?" },
  ],
};

interface Answer {
  readonly predicted: number;
  readonly cached: number;
  readonly promptTokens: number;
}

async function chat(gw: RunningGateway, extra: Record<string, unknown> = {}): Promise<Answer> {
  const res = await fetch(`${gw.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ ...CHAT, ...extra }),
  });
  const text = await res.text();
  expect(res.status, text).toBe(200);
  const usage = (JSON.parse(text) as { usage: Record<string, unknown> }).usage as {
    prompt_tokens: number;
    prompt_tokens_details?: { cached_tokens?: number } | null;
  };
  return {
    predicted: Number(res.headers.get("x-kvrouter-cached-tokens")),
    cached: usage.prompt_tokens_details?.cached_tokens ?? -1,
    promptTokens: usage.prompt_tokens,
  };
}

/** Wait until the index holds the chat's blocks (the first answer's cache events). */
async function indexed(gw: RunningGateway, ids: readonly number[]): Promise<void> {
  await until("events applied", async () => {
    const r = await fetch(`${gw.url}/v1/match`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ token_ids: ids, model: "sim-model" }),
    });
    const body = (await r.json()) as { workers: { overlap_blocks: { gpu: number } }[] };
    return (body.workers[0]?.overlap_blocks.gpu ?? 0) > 0;
  });
}

let reference: LocalTokenizer | null = null;
async function chatIds(): Promise<number[]> {
  reference ??= await loadModelTokenizer(DIR, { threads: 0 });
  return [...(await reference.tokenizeChat(CHAT)).tokenIds];
}

async function repeatedChat(tokenizers: string | null, mode: "local" | "remote") {
  const sim = await startSim(["--tokenizer", DIR]);
  cleanup.push(() => sim.close());
  const gw = await startGateway({
    workers: [simEntry("q", sim)],
    gateway: tokenizers === null ? {} : { tokenizers },
  });
  cleanup.push(() => gw.close());
  const ids = await chatIds();
  const first = await chat(gw);
  expect(first.promptTokens).toBe(ids.length);
  expect(first.predicted).toBe(0);
  await indexed(gw, ids);
  const second = await chat(gw);
  // The whole prompt but its last partial block was cached, and the router knew it.
  expect(second.cached).toBeGreaterThan(ids.length - 2 * BLOCK);
  expect(Math.abs(second.predicted - second.cached)).toBeLessThan(BLOCK);
  const metrics = await (await fetch(`${gw.url}/metrics`)).text();
  expect(metricValue(metrics, "kvrouter_gateway_tokenize_seconds_count", { mode })).toBe(2);
  expect(
    metricValue(metrics, "kvrouter_gateway_prediction_checks_total", {
      worker: "q#0",
      outcome: "match",
    }),
  ).toBe(2);
  expect(metricValue(metrics, "kvrouter_gateway_prompt_length_mismatches_total")).toBe(0);
  return gw;
}

// Each case loads the 11 MB Qwen3 tokenizer in up to three processes: ~4 s alone, but
// 32 s was seen on a loaded machine (Node 22), past the suite's 30 s default.
describe("gateway tokenizers", { timeout: 90_000 }, () => {
  afterEach(async () => {
    await reference?.close();
    reference = null;
  });

  it("local Qwen3 files: a repeated chat is a predicted hit the engine confirms", async () => {
    const gw = await repeatedChat(`sim-model=${DIR}`, "local");
    expect(gw.service.logs.some((l) => String(l.msg).includes("locally"))).toBe(true);
  });

  it("no local files: the worker's /tokenize gives the same ids and the same hit", async () => {
    await repeatedChat(null, "remote");
  });

  it("a worker without /tokenize: routed on load alone, counted, still served", async () => {
    const w = await startScripted((r, res) => {
      if (r.url === "/tokenize") {
        res.writeHead(404).end("no such route");
        return;
      }
      res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}');
    });
    cleanup.push(() => w.close());
    const gw = await startGateway({ workers: [plainEntry("p", w.url)] });
    cleanup.push(() => gw.close());
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(CHAT),
    });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('{"ok":true}');
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    expect(
      metricValue(metrics, "kvrouter_gateway_tokenize_failures_total", { reason: "http_status" }),
    ).toBe(1);
  });

  it("a directory without the model files fails at start-up naming the key and the file", async () => {
    await expect(
      startTestService({ gateway: { tokenizers: "sim-model=/nonexistent/model" } }),
    ).rejects.toThrow(/gateway\.tokenizers: model "sim-model": .*tokenizer\.json/);
  });
});

describe("gateway: cache_salt", () => {
  it("reaches the router: a salted repeat is not predicted cached, an unsalted one is", async () => {
    const sim = await startSim();
    cleanup.push(() => sim.close());
    const gw = await startGateway({ workers: [simEntry("s", sim)] });
    cleanup.push(() => gw.close());
    const prompt = Array.from({ length: 96 }, (_, i) => 500 + i);
    const post = async (extra: Record<string, unknown>) => {
      const res = await fetch(`${gw.url}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "sim-model", prompt, max_tokens: 2, ...extra }),
      });
      await res.text();
      return { status: res.status, predicted: Number(res.headers.get("x-kvrouter-cached-tokens")) };
    };
    expect((await post({})).status).toBe(200);
    await indexed(gw, prompt);
    const salted = await post({ cache_salt: "tenant-a" });
    expect(salted).toEqual({ status: 200, predicted: 0 });
    expect((await post({})).predicted).toBeGreaterThan(0);
    const bad = await post({ cache_salt: 7 });
    expect(bad.status).toBe(400);
  });
});
