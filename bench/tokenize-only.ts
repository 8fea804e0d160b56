/**
 * Tokenization alone, in a fresh process, for `bench:gateway`'s throughput rounds: the
 * gateway's tokenization work (`LocalTokenizer` with the bundled Qwen3 files: chat
 * template, segment cache, encode of the new turn) on the chats the gateway's closed loop
 * sends — the same conversations, each turn a new last user message — in a loop on one
 * thread with no hand-off, so it is the rate one tokenizer thread allows. A process of its
 * own, like each round's gateway, so the rate is not the bench process's (whose heap holds
 * the loops' bodies and figures; measured there, one thread's rate moved between 416 and
 * 641 chats/s from round to round on a quiet machine).
 *
 *   node --import tsx bench/tokenize-only.ts --prompt-tokens 8192 --first-id 8692 \
 *     --histories 16 --seconds 5 [--warm 5]
 *
 * Prints one JSON line: `{ rps, cpu_ms, chats }` (CPU of the whole process per chat).
 */

import { bundledQwen3Dir, loadModelTokenizer } from "../src/tokenize/index.js";
import { history, withNewTurn } from "./gateway-chat.js";

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const TOKENS = arg("prompt-tokens", 8192);
const FIRST_ID = arg("first-id", 500 + TOKENS);
const HISTORIES = arg("histories", 16);
const SECONDS = arg("seconds", 5);
const WARM_S = arg("warm", 5);

const tok = await loadModelTokenizer(bundledQwen3Dir(), { model: "sim-model", threads: 0 });
const hs = Array.from({ length: HISTORIES }, (_, i) => history(FIRST_ID + i, TOKENS));
// As the gateway's rounds: every history seen twice, then a warm loop, then the measure.
for (let round = 0; round < 2; round++) {
  for (const h of hs) await tok.tokenizeChat({ messages: withNewTurn(h) });
}
const loop = async (seconds: number) => {
  const end = performance.now() + seconds * 1000;
  let done = 0;
  while (performance.now() < end) {
    await tok.tokenizeChat({ messages: withNewTurn(hs[done % hs.length]!) });
    done++;
  }
  return done;
};
await loop(WARM_S);
const start = performance.now();
const cpu0 = process.cpuUsage();
const chats = await loop(SECONDS);
const cpu = process.cpuUsage(cpu0);
const s = (performance.now() - start) / 1000;
await tok.close();
process.stdout.write(
  `${JSON.stringify({ rps: chats / s, cpu_ms: (cpu.user + cpu.system) / 1000 / chats, chats })}\n`,
);
