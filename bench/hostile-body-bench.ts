/**
 * What the JSON depth check costs and saves (src/util/json-depth.ts), in-process:
 * - an ordinary 8k-token `/v1/route` body: the depth check alone vs `JSON.parse` (the
 *   check is two native indexOf counts here; timed apart, since on a shared machine the
 *   noise of a parse is larger than the check);
 * - a 3.8 MB body nested 1.9M levels deep: `JSON.parse` (what every such request cost
 *   before, before schema validation and the error reply) vs the depth check that now
 *   rejects it (stops at level 3).
 *
 *   npx tsx bench/hostile-body-bench.ts
 *
 * Last line: JSON with µs per body and the ratios.
 */

import { jsonDepthExceeds } from "../src/util/json-depth.js";

function perCallUs(f: () => void, minMs = 300): number {
  for (let i = 0; i < 3; i++) f();
  let n = 0;
  const t0 = performance.now();
  while (performance.now() - t0 < minMs) {
    f();
    n++;
  }
  return ((performance.now() - t0) * 1000) / n;
}

const tokens = Array.from({ length: 8192 }, (_, i) => (i * 7919) % 150_000);
const flat = JSON.stringify({ token_ids: tokens, request_id: "req-42", model: "m" });
const depth = 1_900_000;
const deep = `{"token_ids":${"[".repeat(depth)}1${"]".repeat(depth)}}`;
// The check reads the body's bytes, as the parsers receive them.
const flatBytes = Buffer.from(flat);
const deepBytes = Buffer.from(deep);

const flatParse = perCallUs(() => JSON.parse(flat));
const flatCheck = perCallUs(() => jsonDepthExceeds(flatBytes, 2));
const deepParse = perCallUs(() => JSON.parse(deep), 1000);
const deepChecked = perCallUs(() => jsonDepthExceeds(deepBytes, 2));

const r = (x: number) => Math.round(x * 100) / 100;
console.log(`8k-token body (${flat.length} B): parse ${r(flatParse)} µs, check ${r(flatCheck)} µs`);
console.log(`deep body (${deep.length} B): parse ${r(deepParse)} µs, check ${r(deepChecked)} µs`);
console.log(
  JSON.stringify({
    flat_bytes: flat.length,
    flat_parse_us: r(flatParse),
    flat_check_us: r(flatCheck),
    flat_check_share: r(flatCheck / flatParse),
    deep_bytes: deep.length,
    deep_parse_us: r(deepParse),
    deep_check_us: r(deepChecked),
  }),
);
