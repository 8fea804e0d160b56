/**
 * What a user meets pointing the official OpenAI client (`openai` on npm) at the gateway:
 * one real gateway (`gateway.authToken` set) in front of one simulated vLLM worker on the
 * bundled Qwen3 tokenizer and chat template (`--tokenizer`; the gateway tokenizes through
 * the worker's `/tokenize`, which saves loading the files a second time), over loopback
 * HTTP, the SDK with `baseURL: <gateway>/v1`. Chats and completions, whole and streamed
 * (content, and the final usage chunk asked for with `stream_options.include_usage`),
 * `models.list`, the `x-kvrouter-*` headers through `.withResponse()`, the gateway's
 * errors as the SDK's typed `APIError`s (status, message, `param`, `type`, `code`), a
 * wrong key, the SDK's timeout and a stream left early (nothing stays in flight), and the
 * SDK's own retries on the admission queue's 429 (honouring `Retry-After`) and on a 503.
 * One gateway and worker serve the whole file (the cases run one after the other).
 */

import OpenAI, {
  APIConnectionTimeoutError,
  APIError,
  AuthenticationError,
  BadRequestError,
  InternalServerError,
  NotFoundError,
  RateLimitError,
} from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bundledQwen3Dir } from "../src/tokenize/index.js";
import {
  inFlightTotal,
  metricValue,
  pushLoad,
  type RunningGateway,
  simEntry,
  startGateway,
  startSim,
  until,
} from "./gateway-harness.js";

const DIR = bundledQwen3Dir();
const TOKEN = "sdk-test-token";
const MODEL = "sim-model";
const BODY_LIMIT = 64 * 1024;

let sim: Awaited<ReturnType<typeof startSim>>;
let gw: RunningGateway;
let client: OpenAI;

// Loading the tokenizer takes ~1.5 s alone; far longer was seen on a loaded machine.
beforeAll(async () => {
  sim = await startSim(["--tokenizer", DIR]);
  gw = await startGateway({
    workers: [simEntry("q", sim)],
    server: { bodyLimitBytes: BODY_LIMIT },
    gateway: {
      authToken: TOKEN,
      // The 429 case makes the one worker look busy; nothing else comes near these.
      busyWaiting: 4,
      queueTimeoutMs: 100,
    },
  });
  // No retries unless a case asks: an error must show up as it is.
  client = new OpenAI({ apiKey: TOKEN, baseURL: `${gw.url}/v1`, maxRetries: 0 });
}, 60_000);

afterAll(async () => {
  await gw?.close();
  await sim?.close();
});

const MESSAGES = [
  { role: "system" as const, content: "You are a terse assistant for an inference fleet." },
  { role: "user" as const, content: "What does a KV-cache-aware router do?" },
];

async function metrics(): Promise<string> {
  return (await fetch(`${gw.url}/metrics`)).text();
}

/** The SDK's rejection, checked to be an `APIError`. */
async function apiError(p: Promise<unknown>): Promise<APIError> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(APIError);
  return err as APIError;
}

describe("the OpenAI SDK against the gateway", () => {
  it("chat.completions.create: the worker's answer, typed", async () => {
    const c = await client.chat.completions.create({
      model: MODEL,
      messages: MESSAGES,
      max_tokens: 6,
    });
    expect(c.object).toBe("chat.completion");
    expect(c.model).toBe(MODEL);
    expect(c.choices).toHaveLength(1);
    expect(c.choices[0]!.message.role).toBe("assistant");
    expect(c.choices[0]!.message.content?.length).toBeGreaterThan(0);
    expect(c.choices[0]!.finish_reason).toBe("length");
    expect(c.usage?.completion_tokens).toBe(6);
    expect(c.usage?.prompt_tokens).toBeGreaterThan(10);
  });

  it("a streamed chat: deltas add up to the whole answer's content, usage comes last", async () => {
    const whole = await client.chat.completions.create({
      model: MODEL,
      messages: MESSAGES,
      max_tokens: 5,
    });
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: MESSAGES,
      max_tokens: 5,
      stream: true,
      stream_options: { include_usage: true },
    });
    let content = "";
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    for await (const chunk of stream) {
      chunks.push(chunk);
      content += chunk.choices[0]?.delta.content ?? "";
    }
    expect(content).toBe(whole.choices[0]!.message.content);
    expect(chunks[0]!.choices[0]!.delta.role).toBe("assistant");
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.usage?.completion_tokens).toBe(5);
    expect(last.usage?.prompt_tokens).toBe(whole.usage?.prompt_tokens);
    expect(chunks.slice(0, -1).every((c) => c.usage == null)).toBe(true);
    expect(chunks.at(-2)!.choices[0]!.finish_reason).toBe("length");
  });

  it("a streamed chat without include_usage: no usage chunk reaches the SDK", async () => {
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: MESSAGES,
      max_tokens: 3,
      stream: true,
    });
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.length).toBeGreaterThan(1);
    expect(chunks.every((c) => c.choices.length === 1 && c.usage == null)).toBe(true);
  });

  it("completions.create: a string prompt, a one-prompt array, token ids, streamed", async () => {
    const prompt = "The router keys each block of the prompt by";
    const text = await client.completions.create({ model: MODEL, prompt, max_tokens: 4 });
    expect(text.object).toBe("text_completion");
    expect(text.choices[0]!.text.length).toBeGreaterThan(0);
    expect(text.usage?.completion_tokens).toBe(4);
    // vLLM takes an array of prompts; the simulator serves one per request.
    const array = await client.completions.create({
      model: MODEL,
      prompt: [prompt],
      max_tokens: 4,
    });
    expect(array.choices[0]!.text).toBe(text.choices[0]!.text);
    expect(array.usage?.prompt_tokens).toBe(text.usage?.prompt_tokens);
    const ids = await client.completions.create({
      model: MODEL,
      prompt: [785, 9273, 6894, 1817, 2504],
      max_tokens: 2,
    });
    expect(ids.usage?.prompt_tokens).toBe(5);
    const stream = await client.completions.create({
      model: MODEL,
      prompt,
      max_tokens: 4,
      stream: true,
      stream_options: { include_usage: true },
    });
    let streamed = "";
    let usage: OpenAI.Completions.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      streamed += chunk.choices[0]?.text ?? "";
      usage = chunk.usage ?? usage;
    }
    expect(streamed).toBe(text.choices[0]!.text);
    expect(usage?.completion_tokens).toBe(4);
  });

  it("a batch of prompts goes to the worker, whose refusal reaches the SDK in vLLM's shape", async () => {
    const err = await apiError(
      client.completions.create({ model: MODEL, prompt: ["one", "two"], max_tokens: 1 }),
    );
    expect(err).toBeInstanceOf(BadRequestError);
    expect(err.status).toBe(400);
    expect(err.param).toBe("prompt");
    expect(err.message).toMatch(/^400 .*prompt/);
    // Asked for as a stream: the worker's JSON refusal, not a stream, and the same error.
    const streamed = await apiError(
      client.completions.create({ model: MODEL, prompt: ["one", "two"], stream: true }),
    );
    expect(streamed).toBeInstanceOf(BadRequestError);
    expect(streamed.message).toBe(err.message);
  });

  it("models.list: the fleet's models as a page", async () => {
    const page = await client.models.list();
    const ids: string[] = [];
    for await (const m of page) {
      expect(m.object).toBe("model");
      ids.push(m.id);
    }
    expect(ids).toContain(MODEL);
    // `GET /v1/models/{id}` is not served (vLLM's server has no such route either).
    expect(await apiError(client.models.retrieve(MODEL))).toBeInstanceOf(NotFoundError);
  });

  it("the x-kvrouter-* headers through .withResponse(), whole and streamed", async () => {
    const { data, response } = await client.chat.completions
      .create({ model: MODEL, messages: MESSAGES, max_tokens: 1 })
      .withResponse();
    expect(data.choices).toHaveLength(1);
    expect(response.headers.get("x-kvrouter-worker")).toBe("q#0");
    expect(Number(response.headers.get("x-kvrouter-cached-tokens"))).toBeGreaterThanOrEqual(0);
    expect(response.headers.get("x-kvrouter-request-id")).toMatch(/^gw-/);
    expect(response.headers.get("server-timing")).toMatch(/kvrouter;dur=/);
    const streamed = await client.completions
      .create({ model: MODEL, prompt: "hello", max_tokens: 2, stream: true })
      .withResponse();
    expect(streamed.response.headers.get("x-kvrouter-worker")).toBe("q#0");
    expect(streamed.response.headers.get("content-type")).toMatch(/text\/event-stream/);
    for await (const _ of streamed.data);
  });

  it("chat.completions.stream: the SDK's stream helper assembles the final completion", async () => {
    const runner = client.chat.completions.stream({
      model: MODEL,
      messages: MESSAGES,
      max_tokens: 4,
      stream_options: { include_usage: true },
    });
    let deltas = "";
    runner.on("content", (delta) => {
      deltas += delta;
    });
    const final = await runner.finalChatCompletion();
    expect(final.choices[0]!.message.content).toBe(deltas);
    expect(final.choices[0]!.finish_reason).toBe("length");
    expect(final.usage?.completion_tokens).toBe(4);
  });

  it("the SDK's timeout and a stream left early: the worker stops generating, nothing in flight", async () => {
    // 2,000 tokens at 1 ms each: the SDK gives up long before the end.
    const long = { model: MODEL, prompt: "a long answer", max_tokens: 2000 };
    const generated = () => sim.engine.counters().generationTokens;
    const idle = async () => {
      await until("nothing in flight", async () => (await inFlightTotal(gw.url)) === 0);
      await until("the worker idle", () => sim.engine.counters().running === 0);
    };
    let before = generated();
    const err = await apiError(client.completions.create(long, { timeout: 150 }));
    expect(err).toBeInstanceOf(APIConnectionTimeoutError);
    await idle();
    expect(generated() - before).toBeLessThan(long.max_tokens);

    before = generated();
    const stream = await client.completions.create({ ...long, stream: true });
    let n = 0;
    for await (const _ of stream) if (++n === 3) break;
    await idle();
    expect(generated() - before).toBeLessThan(long.max_tokens);
  });

  it("a request without a model is served, as vLLM serves it with its own model", async () => {
    const body = { messages: MESSAGES, max_tokens: 1 } as unknown as Parameters<
      typeof client.chat.completions.create
    >[0];
    const c = (await client.chat.completions.create(body)) as OpenAI.Chat.ChatCompletion;
    expect(c.model).toBe(MODEL);
  });

  it("a bad body: BadRequestError naming the field, in OpenAI's error shape", async () => {
    const noMessages = { model: MODEL, max_tokens: 1 } as unknown as Parameters<
      typeof client.chat.completions.create
    >[0];
    const a = await apiError(client.chat.completions.create(noMessages));
    expect(a).toBeInstanceOf(BadRequestError);
    expect(a.status).toBe(400);
    expect(a.param).toBe("messages");
    expect(a.type).toBe("invalid_request_error");
    expect(a.code).toBe("invalid_request");
    expect(a.message).toBe("400 body/messages must be a non-empty array");

    const badModel = { model: 7, messages: MESSAGES } as unknown as Parameters<
      typeof client.chat.completions.create
    >[0];
    const b = await apiError(client.chat.completions.create(badModel));
    expect(b).toBeInstanceOf(BadRequestError);
    expect(b.param).toBe("model");
    expect(b.message).toContain("model");

    const noPrompt = { model: MODEL } as unknown as Parameters<typeof client.completions.create>[0];
    const c = await apiError(client.completions.create(noPrompt));
    expect(c).toBeInstanceOf(BadRequestError);
    expect(c.param).toBe("prompt");
    expect(c.message).toContain("prompt");
  });

  it("a body past server.bodyLimitBytes: a 413 APIError in OpenAI's shape, not retried", async () => {
    const prompt = "block ".repeat(BODY_LIMIT / 5);
    const err = await apiError(
      client.completions.create({ model: MODEL, prompt, max_tokens: 1 }, { maxRetries: 2 }),
    );
    expect(err.status).toBe(413);
    expect([err.code, err.type, err.param]).toEqual([
      "body_too_large",
      "invalid_request_error",
      null,
    ]);
    expect(err.message).toContain("server.bodyLimitBytes");
  });

  it("an unknown model: NotFoundError naming the model", async () => {
    const err = await apiError(
      client.chat.completions.create({ model: "gpt-4o", messages: MESSAGES }),
    );
    expect(err).toBeInstanceOf(NotFoundError);
    expect(err.status).toBe(404);
    expect(err.param).toBe("model");
    expect(err.code).toBe("model_not_found");
    expect(err.message).toContain("'gpt-4o'");
  });

  it("a wrong key: AuthenticationError (401) on every route, nothing forwarded", async () => {
    const wrong = new OpenAI({ apiKey: "not-the-token", baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const prompts = sim.engine.counters().promptTokens;
    for (const call of [
      () => wrong.chat.completions.create({ model: MODEL, messages: MESSAGES }),
      () => wrong.chat.completions.create({ model: MODEL, messages: MESSAGES, stream: true }),
      () => wrong.completions.create({ model: MODEL, prompt: "x" }),
      () => wrong.models.list(),
    ]) {
      const err = await apiError(call());
      expect(err).toBeInstanceOf(AuthenticationError);
      expect(err.status).toBe(401);
      expect(err.message).toContain("gateway.authToken");
      // OpenAI's shape, as the gateway's other errors.
      expect([err.code, err.type, err.param]).toEqual([
        "unauthorized",
        "authentication_error",
        null,
      ]);
    }
    expect(sim.engine.counters().promptTokens).toBe(prompts);
  });

  // The two slow cases (the SDK waits before retrying) run side by side: the second has a
  // gateway of its own.
  it.concurrent("the admission queue's 429: RateLimitError with Retry-After, which the SDK's retry honours", async () => {
    await pushLoad(gw.url, "q", 10);
    try {
      const err = await apiError(
        client.completions.create({ model: MODEL, prompt: "busy", max_tokens: 1 }),
      );
      expect(err).toBeInstanceOf(RateLimitError);
      expect(err.status).toBe(429);
      expect(err.type).toBe("rate_limit_error");
      expect(err.code).toBe("rate_limited");
      expect(err.headers?.get("retry-after")).toBe("1");

      // With retries: the first attempt is refused, the worker frees while the SDK waits
      // out Retry-After, the retry is served.
      const rejections = metricValue(await metrics(), "kvrouter_gateway_queue_rejections_total");
      const t0 = Date.now();
      const retried = client.completions.create(
        { model: MODEL, prompt: "busy", max_tokens: 1 },
        { maxRetries: 1 },
      );
      await until(
        "the first attempt refused",
        async () =>
          metricValue(await metrics(), "kvrouter_gateway_queue_rejections_total") > rejections,
      );
      await pushLoad(gw.url, "q", 0);
      const ok = await retried;
      expect(ok.choices).toHaveLength(1);
      expect(Date.now() - t0).toBeGreaterThanOrEqual(1000);
    } finally {
      await pushLoad(gw.url, "q", 0);
    }
    await until("nothing in flight", async () => (await inFlightTotal(gw.url)) === 0);
  });

  it.concurrent("a 503 (no worker registered): InternalServerError after the SDK's own retry", async () => {
    const empty = await startGateway({ workers: [] });
    try {
      const c = new OpenAI({ apiKey: "unused", baseURL: `${empty.url}/v1`, maxRetries: 1 });
      const err = await apiError(c.chat.completions.create({ model: MODEL, messages: MESSAGES }));
      expect(err).toBeInstanceOf(InternalServerError);
      expect(err.status).toBe(503);
      expect(err.code).toBe("no_worker_available");
      // The first attempt and the SDK's retry, each counted as no_worker (not as the
      // client's mistake: the body was fine).
      const text = await (await fetch(`${empty.url}/metrics`)).text();
      const count = (outcome: string) =>
        metricValue(text, "kvrouter_gateway_requests_total", { route: "chat", outcome });
      expect(count("no_worker")).toBe(2);
      expect(count("invalid")).toBe(0);
    } finally {
      await empty.close();
    }
  });
});
