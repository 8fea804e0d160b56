/**
 * Chat workloads for `gateway-bench.ts`, on the real Qwen3 tokenizer: conversations of a
 * given size whose history the gateway has seen and whose last user turn is new (a
 * follow-up, or a regenerated turn), and the in-process tokenization figures of the same
 * workload (the production `LocalTokenizer` options): p50/p99 of a turn continuing a seen
 * conversation, p99 of a conversation never seen (cold), and tokenization-only throughput
 * on one thread.
 */

import { textOf } from "../src/demo/workload.js";
import { bundledQwen3Dir, loadModelTokenizer } from "../src/tokenize/index.js";

export interface ChatMessage {
  readonly role: "system" | "user" | "assistant";
  readonly content: string;
}

/** Words (each one Qwen3 token) from a seed: a deterministic generator, no repeats across seeds. */
function words(seed: number, n: number): string {
  let s = seed >>> 0 || 1;
  return textOf(
    Array.from({ length: n }, () => {
      s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
      return s >>> 8;
    }),
  );
}

export const NEW_TURN_TOKENS = 200;

/**
 * A conversation of about `tokens` tokens without its last user turn: a 1k-token system
 * prompt shared by all conversations, then user/assistant pairs of ~1k tokens each.
 */
export function history(id: number, tokens: number): ChatMessage[] {
  // textOf adds a full stop every 12 words: 13 tokens per 12 words.
  const out: ChatMessage[] = [{ role: "system", content: words(7, 920) }];
  let left = Math.round(((tokens - 1000 - NEW_TURN_TOKENS) * 12) / 13);
  for (let t = 0; left > 0; t++) {
    const n = Math.min(500, left);
    out.push({ role: "user", content: words(id * 1000 + 2 * t + 11, n) });
    out.push({ role: "assistant", content: words(id * 1000 + 2 * t + 12, n) });
    left -= 2 * n;
  }
  return out;
}

let variant = 0;
/** `h` plus a new user turn (never sent before). */
export function withNewTurn(h: readonly ChatMessage[]): ChatMessage[] {
  return [...h, { role: "user", content: words(1e6 + ++variant, NEW_TURN_TOKENS) }];
}

/**
 * Request bodies for the closed loop, built without serialising the history again for
 * every chat: the client is not what the bench measures, yet it shares the 2 cores with
 * the gateway, so its CPU per chat lowers the rate the gateway can show. The bytes are
 * those of `JSON.stringify({ model, messages: [...h, newTurn], max_tokens, stream: true })`
 * (checked on the first body of each history), the history's part kept as one buffer.
 */
export class ChatBodies {
  readonly #heads = new Map<readonly ChatMessage[], Buffer>();
  readonly #tail: string;

  constructor(
    private readonly model: string,
    private readonly maxTokens: number,
  ) {
    this.#tail = `],"max_tokens":${JSON.stringify(maxTokens)},"stream":true}`;
  }

  /** The body of `h` plus a new user turn (never sent before). */
  next(h: readonly ChatMessage[]): Buffer {
    return Buffer.concat(this.nextParts(h));
  }

  /**
   * The same body in two parts, to be sent one after the other: the history's bytes (the
   * same buffer for every turn of `h`) and the new turn with the rest of the body.
   */
  nextParts(h: readonly ChatMessage[]): [Buffer, Buffer] {
    const turn = withNewTurn(h).at(-1)!;
    let head = this.#heads.get(h);
    const first = head === undefined;
    if (head === undefined) {
      const whole = JSON.stringify({ model: this.model, messages: h });
      head = Buffer.from(whole.slice(0, -2)); // without the closing `]}`
      this.#heads.set(h, head);
    }
    const rest = Buffer.from(`,${JSON.stringify(turn)}${this.#tail}`);
    if (first) {
      const out = Buffer.concat([head, rest]);
      const expected = JSON.stringify({
        model: this.model,
        messages: [...h, turn],
        max_tokens: this.maxTokens,
        stream: true,
      });
      if (out.toString() !== expected)
        throw new Error("ChatBodies: bytes differ from JSON.stringify");
    }
    return [head, rest];
  }
}

const pct = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
};

export interface TokenizeFigures {
  readonly load_ms: number;
  readonly prompt_tokens: number;
  readonly tokenize_p50_ms: number;
  readonly tokenize_p99_ms: number;
  readonly tokenize_cold_p50_ms: number;
  readonly tokenize_cold_p99_ms: number;
  readonly tokenize_only_rps: number;
  /** CPU of this process per tokenization in that loop (steadier than the rate on a busy machine). */
  readonly tokenize_only_cpu_ms: number;
  /** The chat-template render alone (part of each tokenization), on the warm workload. */
  readonly render_p50_ms: number;
  readonly render_p99_ms: number;
}

/**
 * Tokenization alone, in this process, on the gateway's workload shape. Latencies are the
 * production path (`LocalTokenizer` defaults: each request tokenized on the pool's worker
 * thread, the round trip included). `tokenize_only_rps` is the same work with no thread
 * hand-off, on one thread — as many threads as the gateway tokenizes on (its pool has
 * one) — so it is the rate the gateway's tokenization allows, and what `gateway_rps` is
 * held against.
 */
export async function tokenizeFigures(tokens: number, seconds: number): Promise<TokenizeFigures> {
  const t0 = performance.now();
  const tok = await loadModelTokenizer(bundledQwen3Dir(), { model: "sim-model" });
  const loadMs = performance.now() - t0;
  const one = await loadModelTokenizer(bundledQwen3Dir(), { model: "sim-model", threads: 0 });
  try {
    // The first request starts the pool's worker; measure once it is ready.
    await tok.tokenizeChat({ messages: [{ role: "user", content: "warm" }] });
    const deadline = performance.now() + 30_000;
    while (tok.poolState().ready === 0 && performance.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
    const cold: number[] = [];
    const warm: number[] = [];
    const render: number[] = [];
    const histories: ChatMessage[][] = [];
    let promptTokens = 0;
    for (let c = 0; c < 40; c++) {
      const h = history(c + 1, tokens);
      histories.push(h);
      let a = performance.now();
      await tok.tokenizeChat({ messages: withNewTurn(h) });
      cold.push(performance.now() - a);
      one.tokenizeChatSync({ messages: withNewTurn(h) });
      for (let v = 0; v < 5; v++) {
        const messages = withNewTurn(h);
        a = performance.now();
        one.renderChat({ messages });
        render.push(performance.now() - a);
        a = performance.now();
        const r = await tok.tokenizeChat({ messages });
        warm.push(performance.now() - a);
        promptTokens = r.tokenIds.length;
      }
    }
    const end = performance.now() + seconds * 1000;
    let done = 0;
    const start = performance.now();
    const cpu0 = process.cpuUsage();
    while (performance.now() < end) {
      await one.tokenizeChat({ messages: withNewTurn(histories[done % histories.length]!) });
      done++;
    }
    const cpu = process.cpuUsage(cpu0);
    const r1 = (x: number) => Math.round(x * 1000) / 1000;
    return {
      tokenize_only_cpu_ms: r1((cpu.user + cpu.system) / 1000 / done),
      load_ms: Math.round(loadMs),
      prompt_tokens: promptTokens,
      tokenize_p50_ms: r1(pct(warm, 0.5)),
      tokenize_p99_ms: r1(pct(warm, 0.99)),
      tokenize_cold_p50_ms: r1(pct(cold, 0.5)),
      tokenize_cold_p99_ms: r1(pct(cold, 0.99)),
      tokenize_only_rps: Math.round(done / ((performance.now() - start) / 1000)),
      render_p50_ms: r1(pct(render, 0.5)),
      render_p99_ms: r1(pct(render, 0.99)),
    };
  } finally {
    await tok.close();
    await one.close();
  }
}

/**
 * For each conversation, the token ids every continuation shares (the common prefix of
 * two tokenizations with different new turns: the history as the gateway tokenizes it)
 * and a key that identifies the conversation in a request body (the start of its first
 * user turn, as `JSON.stringify` writes it).
 */
export async function historyTokenIds(
  histories: readonly ChatMessage[][],
): Promise<{ key: string; ids: number[] }[]> {
  const tok = await loadModelTokenizer(bundledQwen3Dir(), { model: "sim-model", threads: 0 });
  try {
    const out: { key: string; ids: number[] }[] = [];
    for (const h of histories) {
      const a = (await tok.tokenizeChat({ messages: withNewTurn(h) })).tokenIds;
      const b = (await tok.tokenizeChat({ messages: withNewTurn(h) })).tokenIds;
      let n = 0;
      while (n < a.length && a[n] === b[n]) n++;
      out.push({ key: h[1]!.content.slice(0, HISTORY_KEY_CHARS), ids: a.slice(0, n) });
    }
    return out;
  } finally {
    await tok.close();
  }
}

/** Characters of the first user turn that name a conversation (`historyTokenIds`). */
export const HISTORY_KEY_CHARS = 40;
