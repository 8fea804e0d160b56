/**
 * Over real HTTP on loopback: the simulated worker started with `--tokenizer` (Qwen3's real
 * files) answers `/tokenize` with the same ids as the local `PromptTokenizer` over the
 * corpus, generates text decoded by the real tokenizer; `RemoteTokenizer` failures come
 * back as typed errors (timeout, unreachable, http status, bad response, closed).
 */

import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseSimArgs } from "../src/sim/sim-config.js";
import { type SimWorkerHandle, startSimWorker } from "../src/sim/sim-worker.js";
import {
  bundledQwen3Dir,
  type LocalTokenizer,
  loadModelTokenizer,
  RemoteTokenizer,
  TokenizeError,
} from "../src/tokenize/index.js";
import { CORPUS, GOLDEN } from "./tokenize-corpus.js";

let sim: SimWorkerHandle;
let local: LocalTokenizer;
let remote: RemoteTokenizer;

beforeAll(async () => {
  const config = parseSimArgs([
    "--port",
    "0",
    "--events-port",
    "off",
    "--replay-port",
    "off",
    "--model",
    "qwen3",
    "--tokenizer",
    bundledQwen3Dir(),
    "--decode-ms-per-token",
    "1",
  ]);
  if (config === "help") throw new Error("unexpected help");
  sim = await startSimWorker(config);
  local = await loadModelTokenizer(bundledQwen3Dir(), { model: "qwen3", threads: 0 });
  remote = new RemoteTokenizer({ baseUrl: sim.url, model: "qwen3", timeoutMs: 5_000 });
});
afterAll(async () => {
  await remote?.close();
  await local?.close();
  await sim?.close();
});

describe("sim-worker --tokenizer vs local tokenizer", () => {
  it.each(CORPUS.map((c) => [c.name, c] as const))(
    "%s: /tokenize equals local",
    async (name, c) => {
      const [r, l] =
        c.kind === "completion"
          ? await Promise.all([
              remote.tokenizeCompletion(c.prompt),
              local.tokenizeCompletion(c.prompt),
            ])
          : await Promise.all([remote.tokenizeChat(c.request), local.tokenizeChat(c.request)]);
      expect(r.tokenIds).toEqual(l.tokenIds);
      expect(r.tokenIds).toEqual(GOLDEN.get(name)!.ids);
    },
  );

  it("a chat's reasoning_effort and chat_template reach the worker", async () => {
    const messages = [{ role: "user", content: "hi" }];
    for (const extra of [
      { reasoning_effort: "none" },
      { reasoning_effort: "none", chat_template_kwargs: { enable_thinking: true } },
    ]) {
      const request = { messages, ...extra };
      const [r, l] = await Promise.all([remote.tokenizeChat(request), local.tokenizeChat(request)]);
      expect(r.tokenIds).toEqual(l.tokenIds);
    }
    const think = local.encodeSync("<think>\n\n</think>\n\n");
    const off = (await remote.tokenizeChat({ messages, reasoning_effort: "none" })).tokenIds;
    expect(off.slice(-think.length)).toEqual(think);
    // The simulator, like vLLM without --trust-request-chat-template, refuses it.
    await expect(
      remote.tokenizeChat({ messages, chat_template: "{{ messages[0].content }}" }),
    ).rejects.toMatchObject({ code: "http_status" });
  });

  it("generates text decoded by the real tokenizer, with prompt_tokens from it", async () => {
    const body = { model: "qwen3", messages: [{ role: "user", content: "Hi" }], max_tokens: 5 };
    const res = await fetch(`${sim.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(200);
    const out = (await res.json()) as {
      choices: { message: { content: string } }[];
      usage: { prompt_tokens: number };
    };
    expect(out.usage.prompt_tokens).toBe((await local.tokenizeChat(body)).tokenIds.length);
    const text = out.choices[0]!.message.content;
    expect(text.length).toBeGreaterThan(0);
    expect(text).not.toMatch(/<\d+>/); // the stand-in's placeholder for unknown ids
  });

  it("rejects a chat the template cannot take with a 400", async () => {
    const res = await fetch(`${sim.url}/tokenize`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        messages: [{ role: "user", content: "x" }],
        chat_template_kwargs: { tokenize: true },
      }),
    });
    expect(res.status).toBe(400);
  });
});

describe("RemoteTokenizer errors", () => {
  let silent: Server;
  let silentUrl: string;
  beforeAll(async () => {
    silent = createServer(() => {}); // accepts and never answers
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
    silentUrl = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    silent.closeAllConnections();
    await new Promise((r) => silent.close(r));
  });

  const codeOf = async (p: Promise<unknown>) => {
    try {
      await p;
    } catch (err) {
      expect(err).toBeInstanceOf(TokenizeError);
      return (err as TokenizeError).code;
    }
    return "no error";
  };

  it("times out on a worker that does not answer", async () => {
    const t = new RemoteTokenizer({ baseUrl: silentUrl, model: "m", timeoutMs: 100 });
    expect(await codeOf(t.tokenizeCompletion("x"))).toBe("timeout");
  });

  it("reports an unreachable worker", async () => {
    const probe = createServer();
    await new Promise<void>((r) => probe.listen(0, "127.0.0.1", r));
    const port = (probe.address() as AddressInfo).port;
    await new Promise((r) => probe.close(r));
    const t = new RemoteTokenizer({ baseUrl: `http://127.0.0.1:${port}`, model: "m" });
    expect(await codeOf(t.tokenizeCompletion("x"))).toBe("unreachable");
  });

  it("reports a non-2xx answer (unknown model) and a closed tokenizer", async () => {
    const t = new RemoteTokenizer({ baseUrl: sim.url, model: "not-served" });
    expect(await codeOf(t.tokenizeCompletion("x"))).toBe("http_status");
    const c = new RemoteTokenizer({ baseUrl: silentUrl, model: "m", timeoutMs: 5_000 });
    const pending = codeOf(c.tokenizeCompletion("x"));
    await new Promise((r) => setTimeout(r, 20));
    await c.close();
    expect(await pending).toBe("closed");
    expect(await codeOf(c.tokenizeCompletion("x"))).toBe("closed");
  });

  it("reports an answer without tokens", async () => {
    const odd = createServer((_req, res) => res.end('{"count": 1}'));
    await new Promise<void>((r) => odd.listen(0, "127.0.0.1", r));
    const t = new RemoteTokenizer({
      baseUrl: `http://127.0.0.1:${(odd.address() as AddressInfo).port}`,
      model: "m",
    });
    expect(await codeOf(t.tokenizeCompletion("x"))).toBe("bad_response");
    await new Promise((r) => odd.close(r));
  });
});
