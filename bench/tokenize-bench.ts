/**
 * Tokenization cost on the real Qwen3 tokenizer (`npm run bench:tokenize`): an 8k-token
 * chat turn cold (nothing seen) and warm (the earlier turns seen: the segment cache serves
 * them), p50/p99 over conversations; CPU ms per 100k-token prompt cold and when continuing
 * a seen conversation. Encoding on this thread (threads: 0). Last line: one JSON object.
 */

import { performance } from "node:perf_hooks";
import { bundledQwen3Dir, type LocalTokenizer, loadModelTokenizer } from "../src/tokenize/index.js";

const WORDS = (
  "the cache router block prefix token engine latency worker queue request model prompt " +
  "memory batch decode prefill über naïve 東京 日本語 données café 🙂 f(x) { return x + 1; }"
).split(" ");

function textOf(seed: number, chars: number): string {
  let s = seed >>> 0;
  const r = () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
  let out = "";
  while (out.length < chars) {
    const w = WORDS[Math.floor(r() * WORDS.length)]!;
    out += (r() < 0.1 ? `${w}${Math.floor(r() * 1e6)}` : w) + (r() < 0.92 ? " " : "\n");
  }
  return out;
}

/** A conversation: system prompt, then `turns` user/assistant pairs of `charsPerTurn`. */
function conversation(seed: number, turns: number, charsPerTurn: number) {
  const messages: { role: string; content: string }[] = [
    { role: "system", content: textOf(seed, 2_000) },
  ];
  for (let t = 0; t < turns; t++) {
    messages.push({ role: "user", content: textOf(seed * 100 + t * 2, charsPerTurn) });
    if (t < turns - 1)
      messages.push({ role: "assistant", content: textOf(seed * 100 + t * 2 + 1, 600) });
  }
  return messages;
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))]!;
};
const round = (x: number) => Math.round(x * 10) / 10;

function cpuMs(fn: () => Promise<unknown>): Promise<number> {
  const a = process.cpuUsage();
  return fn().then(() => {
    const d = process.cpuUsage(a);
    return (d.user + d.system) / 1000;
  });
}

async function main(): Promise<void> {
  const t0 = performance.now();
  const cold: LocalTokenizer = await loadModelTokenizer(bundledQwen3Dir(), {
    threads: 0,
    segmentCacheBytes: 0,
  });
  const loadMs = performance.now() - t0;
  const warm = await loadModelTokenizer(bundledQwen3Dir(), { threads: 0 });
  const N = 30;
  const coldMs: number[] = [];
  const warmMs: number[] = [];
  let turnTokens = 0;
  for (let i = 1; i <= N; i++) {
    // 8k tokens in the last user turn (~3 chars/token on this text), three turns before it.
    const msgs = conversation(i, 4, 24_500);
    await warm.tokenizeChat({ messages: msgs.slice(0, -2) }); // earlier turns seen
    let a = performance.now();
    const r = await cold.tokenizeChat({ messages: msgs });
    coldMs.push(performance.now() - a);
    a = performance.now();
    const w = await warm.tokenizeChat({ messages: msgs });
    warmMs.push(performance.now() - a);
    if (w.tokenIds.length !== r.tokenIds.length) throw new Error("warm and cold differ");
    turnTokens =
      r.tokenIds.length -
      (await cold.tokenizeChat({ messages: msgs.slice(0, -1) })).tokenIds.length;
  }
  // 100k-token prompt: 12 turns of ~8k tokens; cold vs continuing (all but the last turn seen).
  const big = conversation(999, 12, 36_000);
  let bigTokens = 0;
  const cpuCold = await cpuMs(async () => {
    bigTokens = (await cold.tokenizeChat({ messages: big })).tokenIds.length;
  });
  await warm.tokenizeChat({ messages: big.slice(0, -2) });
  const cpuCont = await cpuMs(() => warm.tokenizeChat({ messages: big }));
  const per100k = (ms: number) => round((ms * 100_000) / bigTokens);
  const result = {
    bench: "tokenize",
    model: "qwen3",
    loadMs: Math.round(loadMs),
    probes: cold.probe?.probes ?? 0,
    chatTurnTokens: turnTokens,
    coldP50Ms: round(pct(coldMs, 0.5)),
    coldP99Ms: round(pct(coldMs, 0.99)),
    warmP50Ms: round(pct(warmMs, 0.5)),
    warmP99Ms: round(pct(warmMs, 0.99)),
    bigPromptTokens: bigTokens,
    cpuMsPer100kCold: per100k(cpuCold),
    cpuMsPer100kContinuing: per100k(cpuCont),
  };
  console.log(
    `8k-token chat turn (+${turnTokens} tokens, 3 turns before): cold p50 ${result.coldP50Ms} ms p99 ${result.coldP99Ms} ms; ` +
      `warm p50 ${result.warmP50Ms} ms p99 ${result.warmP99Ms} ms`,
  );
  console.log(
    `CPU per 100k-token prompt: cold ${result.cpuMsPer100kCold} ms, continuing ${result.cpuMsPer100kContinuing} ms`,
  );
  console.log(JSON.stringify(result));
  await cold.close();
  await warm.close();
}

await main();
