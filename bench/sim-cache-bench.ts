/**
 * Throughput of the simulator's paged prefix cache (`src/sim/kv-cache.ts`), the piece the
 * trace replay runs millions of times: admissions of long prompts sharing prefixes, with
 * steady eviction. Prints figures, then one JSON line. Run: `npx tsx bench/sim-cache-bench.ts`.
 */

import { PagedKvCache } from "../src/sim/kv-cache.js";

const REQUESTS = Number(process.env.REQUESTS ?? 20_000);
const PREFIXES = 200;
const PREFIX_TOKENS = 2048;
const SUFFIX_TOKENS = 512;
const BLOCK_SIZE = 16;
const NUM_BLOCKS = 20_000;
const CONCURRENT = 4;

const prefixes = Array.from({ length: PREFIXES }, (_, p) =>
  Array.from({ length: PREFIX_TOKENS }, (_, i) => (p * 7919 + i * 31) % 128_000),
);
// Prompts are built before timing so only the cache is measured.
const prompts = Array.from({ length: REQUESTS }, (_, r) => {
  const out = new Uint32Array(PREFIX_TOKENS + SUFFIX_TOKENS);
  out.set(prefixes[(Math.imul(r, 2654435761) >>> 0) % PREFIXES]!);
  for (let i = 0; i < SUFFIX_TOKENS; i++) out[PREFIX_TOKENS + i] = (r * 131 + i) % 128_000;
  return out;
});

const cache = new PagedKvCache({ numBlocks: NUM_BLOCKS, blockSize: BLOCK_SIZE, seed: 1 });
const live: ReturnType<typeof cache.sequence>[] = [];
let hitTokens = 0;
let tokens = 0;
const t0 = performance.now();
for (const prompt of prompts) {
  const seq = cache.sequence(prompt);
  let got = cache.admit(seq);
  while (got === null) {
    cache.free(live.shift()!);
    got = cache.admit(seq);
  }
  hitTokens += got.hitTokens;
  tokens += prompt.length;
  live.push(seq);
  if (live.length > CONCURRENT) cache.free(live.shift()!);
}
const ms = performance.now() - t0;
const result = {
  bench: "sim-cache",
  requests: REQUESTS,
  promptTokens: PREFIX_TOKENS + SUFFIX_TOKENS,
  blockSize: BLOCK_SIZE,
  numBlocks: NUM_BLOCKS,
  ms: Math.round(ms),
  requestsPerSec: Math.round((REQUESTS / ms) * 1000),
  blocksPerSec: Math.round((tokens / BLOCK_SIZE / ms) * 1000),
  hitRate: Number((hitTokens / tokens).toFixed(3)),
  evictions: cache.stats().evictions,
};
console.log(
  `${REQUESTS} admissions of ${result.promptTokens}-token prompts in ${result.ms} ms: ` +
    `${result.requestsPerSec} req/s, ${result.blocksPerSec} blocks/s, hit rate ${result.hitRate}, ` +
    `${result.evictions} evictions`,
);
console.log(JSON.stringify(result));
