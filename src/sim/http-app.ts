/**
 * The simulated worker's HTTP face: the parts of vLLM's OpenAI-compatible server a router
 * and a benchmark client touch (`/v1/completions`, `/v1/chat/completions`, streaming or
 * not; `/tokenize`, `/detokenize`, `/reset_prefix_cache`, `/v1/models`, `/health`,
 * `/metrics`). Built by `buildSimApp(deps)`; listening is the caller's job.
 */

import { randomUUID } from "node:crypto";
import Fastify, { type FastifyInstance, type FastifyReply } from "fastify";
import { type RequestOutcome, RequestTooLongError, type SimEngine } from "./engine.js";
import type { SimMetrics } from "./metrics.js";
import {
  type GenerationParams,
  type PromptInput,
  parseChatRequest,
  parseCompletionRequest,
  parseTokenizeRequest,
  SimHttpError,
} from "./openai-request.js";
import type { SimClock } from "./timing.js";
import type { SimTokenizer } from "./tokenizer.js";

/** A real tokenizer (`--tokenizer DIR`): replaces the stand-in for prompts, chats and decoding. */
export interface SimRealTokenizer {
  /** Completion prompt ids, special tokens added as the engine adds them. */
  completion(text: string): number[];
  /** Chat request body → rendered and encoded prompt ids (throws SimHttpError on a bad request). */
  chat(body: unknown): number[];
  decode(ids: readonly number[]): string;
}

export interface SimAppDeps {
  readonly engine: SimEngine;
  readonly tokenizer: SimTokenizer;
  readonly realTokenizer?: SimRealTokenizer | null;
  readonly metrics: SimMetrics;
  readonly clock: SimClock;
  readonly modelName: string;
  /** LoRA adapters served besides the model (vLLM's `--lora-modules`). Default none. */
  readonly loras?: readonly string[];
  readonly maxModelLen: number;
  /** Largest request body in bytes. Default 64 MiB. */
  readonly bodyLimit?: number;
}

type Kind = "completion" | "chat";

function errorBody(status: number, message: string, param: string | null) {
  const type =
    status === 404 ? "NotFoundError" : status >= 500 ? "InternalServerError" : "BadRequestError";
  return { error: { message, type, param, code: status } };
}

export function buildSimApp(deps: SimAppDeps): FastifyInstance {
  const { engine, tokenizer, metrics, clock, modelName } = deps;
  const real = deps.realTokenizer ?? null;
  const app = Fastify({ logger: false, bodyLimit: deps.bodyLimit ?? 64 * 1024 * 1024 });
  let succeeded = 0;

  app.setErrorHandler((err, _req, reply) => {
    if (err instanceof SimHttpError) {
      return reply.code(err.statusCode).send(errorBody(err.statusCode, err.message, err.param));
    }
    const e = err as { statusCode?: number; message?: string };
    const status = typeof e.statusCode === "number" && e.statusCode >= 400 ? e.statusCode : 500;
    return reply.code(status).send(errorBody(status, e.message ?? "internal error", null));
  });
  app.setNotFoundHandler((req, reply) => {
    reply.code(404).send(errorBody(404, `no route ${req.method} ${req.url}`, null));
  });

  const loras = new Set(deps.loras ?? []);
  /** The adapter a request names (null: the base model); 404 for a name not served. */
  const checkModel = (model: string | null): string | null => {
    if (model === null || model === modelName) return null;
    if (loras.has(model)) return model;
    throw new SimHttpError(404, `The model \`${model}\` does not exist.`, "model");
  };
  const tokensOf = (p: PromptInput): number[] =>
    p.kind === "tokens" ? p.tokens : real ? real.completion(p.text) : tokenizer.encode(p.text);

  /** Submit to the engine and answer, streamed or whole. */
  const generate = (
    kind: Kind,
    params: GenerationParams,
    promptTokens: number[],
    reply: FastifyReply,
    loraName: string | null,
  ): Promise<unknown> | undefined => {
    // vLLM answers with the adapter's name as the model (`OpenAIServingModels.model_name`).
    const answerModel = loraName ?? modelName;
    const id = `${kind === "chat" ? "chatcmpl" : "cmpl"}-${randomUUID().replaceAll("-", "")}`;
    const created = Math.floor(Date.now() / 1000);
    const startedAt = clock.now();
    const object = kind === "chat" ? "chat.completion" : "text_completion";
    let text = "";
    let done = false;
    let streaming = false;
    let resolveWhole: (v: unknown) => void = () => {};

    const usageOf = (o: RequestOutcome) => ({
      prompt_tokens: o.promptTokens,
      total_tokens: o.promptTokens + o.completionTokens,
      completion_tokens: o.completionTokens,
      prompt_tokens_details: { cached_tokens: o.cachedTokens },
    });
    const chunk = (piece: string, finish: string | null, first: boolean) => {
      const choice =
        kind === "chat"
          ? {
              index: 0,
              delta: first ? { role: "assistant", content: piece } : { content: piece },
              logprobs: null,
              finish_reason: finish,
            }
          : { index: 0, text: piece, logprobs: null, finish_reason: finish, stop_reason: null };
      return {
        id,
        object: `${object}${kind === "chat" ? ".chunk" : ""}`,
        created,
        model: answerModel,
        choices: [choice],
      };
    };
    const write = (data: unknown) => {
      reply.raw.write(`data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`);
    };

    engine.submit(
      { id, promptTokens, maxTokens: params.maxTokens, loraName },
      {
        onToken: (token, index) => {
          if (index === 0) metrics.observeTtft((clock.now() - startedAt) / 1000);
          const piece = real ? real.decode([token]) : tokenizer.decodeToken(token);
          text += piece;
          if (streaming) write(chunk(piece, null, index === 0));
        },
        onFinish: (o) => {
          done = true;
          if (o.reason === "abort") return;
          succeeded++;
          if (streaming) {
            write(chunk("", o.reason, false));
            if (params.includeUsage) {
              write({
                id,
                object: `${object}.chunk`,
                created,
                model: answerModel,
                choices: [],
                usage: usageOf(o),
              });
            }
            write("[DONE]");
            reply.raw.end();
            return;
          }
          const choice =
            kind === "chat"
              ? {
                  index: 0,
                  message: { role: "assistant", content: text, tool_calls: [] },
                  logprobs: null,
                  finish_reason: o.reason,
                  stop_reason: null,
                }
              : {
                  index: 0,
                  text,
                  logprobs: null,
                  finish_reason: o.reason,
                  stop_reason: null,
                  prompt_logprobs: null,
                };
          resolveWhole({
            id,
            object,
            created,
            model: answerModel,
            choices: [choice],
            usage: usageOf(o),
          });
        },
      },
    );
    // The client went away before the end: stop generating and free the blocks.
    reply.raw.on("close", () => {
      if (!done) engine.abort(id);
    });
    if (params.stream) {
      streaming = true;
      reply.hijack();
      reply.raw.writeHead(200, {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-cache",
        connection: "keep-alive",
      });
      return undefined;
    }
    return new Promise((resolve) => {
      resolveWhole = resolve;
    });
  };

  const submitOr400 = (fn: () => Promise<unknown> | undefined) => {
    try {
      return fn();
    } catch (err) {
      if (err instanceof RequestTooLongError) throw new SimHttpError(400, err.message, null);
      throw err;
    }
  };

  app.post("/v1/completions", async (req, reply) => {
    const r = parseCompletionRequest(req.body);
    const lora = checkModel(r.model);
    const tokens = tokensOf(r.prompt);
    return submitOr400(() => generate("completion", r, tokens, reply, lora));
  });

  app.post("/v1/chat/completions", async (req, reply) => {
    const r = parseChatRequest(req.body);
    const lora = checkModel(r.model);
    const tokens = real ? real.chat(req.body) : tokenizer.encode(tokenizer.renderChat(r.messages));
    return submitOr400(() => generate("chat", r, tokens, reply, lora));
  });

  app.post("/tokenize", async (req) => {
    const r = parseTokenizeRequest(req.body);
    checkModel(r.model);
    const tokens =
      r.kind !== "chat"
        ? tokensOf(r.prompt)
        : real
          ? real.chat(req.body)
          : tokenizer.encode(tokenizer.renderChat(r.messages, r.addGenerationPrompt));
    return { count: tokens.length, max_model_len: deps.maxModelLen, tokens, token_strs: null };
  });

  app.post("/detokenize", async (req) => {
    const b = req.body as { tokens?: unknown } | null;
    const t = b?.tokens;
    if (!Array.isArray(t) || !t.every((x) => Number.isInteger(x) && x >= 0)) {
      throw new SimHttpError(400, "'tokens' must be an array of non-negative integers", "tokens");
    }
    return { prompt: real ? real.decode(t as number[]) : tokenizer.decode(t as number[]) };
  });

  app.post("/reset_prefix_cache", async (_req, reply) => {
    if (!engine.resetPrefixCache()) {
      const running = engine.counters().running;
      throw new SimHttpError(
        409,
        `cannot reset the prefix cache while ${running} request(s) hold KV blocks; retry when idle`,
      );
    }
    return reply.code(200).send();
  });

  app.get("/v1/models", async () => ({
    object: "list",
    data: [
      {
        id: modelName,
        object: "model",
        created: Math.floor(Date.now() / 1000),
        owned_by: "vllm",
        root: modelName,
        parent: null,
        max_model_len: deps.maxModelLen,
      },
      // vLLM's adapter cards: the adapter's name, its base model as parent.
      ...[...loras].map((name) => ({
        id: name,
        object: "model",
        created: Math.floor(Date.now() / 1000),
        owned_by: "vllm",
        root: `/adapters/${name}`,
        parent: modelName,
        max_model_len: null,
      })),
    ],
  }));

  app.get("/health", async (_req, reply) => reply.code(200).send());

  app.get("/metrics", async (_req, reply) => {
    const body = metrics.render({
      engine: engine.counters(),
      cache: engine.cache.stats(),
      kvUsage: engine.cache.usage(),
      requestSuccess: succeeded,
    });
    return reply.type("text/plain; version=0.0.4; charset=utf-8").send(body);
  });

  return app;
}
