/**
 * Decode micro-benchmark: how many blocks per second the vLLM/SGLang decoder turns into
 * `KvEvent`s, against the alternative it replaced (a reused `@msgpack/msgpack` Decoder
 * with `useBigInt64`, then a walk converting BigInts to engine hashes).
 *
 *   npx tsx bench/decode-bench.ts [blocks]
 *
 * Prints one line per variant, then one JSON line. Noisy on a shared machine: compare
 * variants within one run, not across runs.
 */

import { isDeepStrictEqual } from "node:util";
import { Decoder } from "@msgpack/msgpack";
import { engineHashFromBigInt, engineHashFromBytes } from "../src/protocol/engine-hash.js";
import {
  type EncodeOptions,
  encodeEventBatch,
  type WireEvent,
} from "../src/protocol/event-encoder.js";
import type { KvEvent } from "../src/protocol/events.js";
import { tierOfMedium } from "../src/protocol/events.js";
import { decodeEventBatch } from "../src/protocol/vllm-codec.js";
import { generateWorkload } from "./ingest-workload.js";

const BLOCKS = Number(process.argv[2] ?? 300_000);

/** Synthetic batches: 4 requests × 16 blocks × 16 tokens stored, 16 single-hash removals. */
function synthetic(options: Partial<EncodeOptions>): { payloads: Uint8Array[]; blocks: number } {
  let x = 0x9e3779b97f4a7c15n;
  const next = () => {
    x = BigInt.asUintN(64, x * 6364136223846793005n + 1442695040888963407n);
    return x;
  };
  const payloads: Uint8Array[] = [];
  let blocks = 0;
  while (blocks < BLOCKS) {
    const events: WireEvent[] = [];
    for (let r = 0; r < 4; r++) {
      const hashes = Array.from({ length: 16 }, next);
      const tokens = Array.from({ length: 256 }, () => Number(next() % 151_000n));
      events.push({
        type: "BlockStored",
        blockHashes: hashes,
        parentHash: next(),
        tokenIds: tokens,
        blockSize: 16,
        loraId: null,
        medium: "GPU",
        loraName: null,
      });
    }
    for (let r = 0; r < 16; r++)
      events.push({ type: "BlockRemoved", blockHashes: [next()], medium: "GPU" });
    blocks += 4 * 16 + 16;
    payloads.push(encodeEventBatch({ ts: Date.now() / 1000, events, dpRank: 0 }, options));
  }
  return { payloads, blocks };
}

/** The alternative: generic decode to a tree (one BigInt per hash), then convert. */
const generic = new Decoder({ useBigInt64: true });
const toHash = (h: unknown) =>
  h instanceof Uint8Array
    ? engineHashFromBytes(h)
    : engineHashFromBigInt(BigInt(h as number | bigint));
function genericDecode(payload: Uint8Array): KvEvent[] {
  const batch = generic.decode(payload) as unknown;
  const events = (
    Array.isArray(batch) ? batch[1] : (batch as { events: unknown[] }).events
  ) as unknown[];
  const out: KvEvent[] = [];
  for (const raw of events) {
    const e = Array.isArray(raw)
      ? raw[0] === "BlockStored"
        ? {
            type: raw[0],
            block_hashes: raw[1],
            parent_block_hash: raw[2],
            token_ids: raw[3],
            block_size: raw[4],
            lora_id: raw[5],
            medium: raw[6],
            lora_name: raw[7],
          }
        : { type: raw[0], block_hashes: raw[1], medium: raw[2] }
      : (raw as Record<string, unknown>);
    const medium = (e.medium ?? null) as string | null;
    if (e.type === "BlockStored") {
      out.push({
        type: "stored",
        blockHashes: (e.block_hashes as unknown[]).map(toHash),
        parentHash: e.parent_block_hash == null ? null : toHash(e.parent_block_hash),
        tokenIds: Uint32Array.from(e.token_ids as number[]),
        blockSize: Number(e.block_size),
        loraId: null,
        loraName: (e.lora_name ?? null) as string | null,
        medium,
        tier: tierOfMedium(medium),
      });
    } else if (e.type === "BlockRemoved") {
      out.push({
        type: "removed",
        blockHashes: (e.block_hashes as unknown[]).map(toHash),
        medium,
        tier: tierOfMedium(medium),
      });
    } else out.push({ type: "cleared" });
  }
  return out;
}

function measure(
  name: string,
  payloads: Uint8Array[],
  blocks: number,
  decode: (p: Uint8Array) => unknown,
) {
  for (let i = 0; i < Math.min(payloads.length, 200); i++) decode(payloads[i]!); // warm up
  let best = 0;
  for (let round = 0; round < 5; round++) {
    const t0 = process.hrtime.bigint();
    for (const p of payloads) decode(p);
    const s = Number(process.hrtime.bigint() - t0) / 1e9;
    best = Math.max(best, blocks / s);
  }
  const bytes = payloads.reduce((n, p) => n + p.length, 0);
  console.log(
    `${name.padEnd(44)} ${Math.round(best).toLocaleString("en").padStart(12)} blocks/s  (${payloads.length} batches, ${(bytes / 1e6).toFixed(1)} MB)`,
  );
  return Math.round(best);
}

const results: Record<string, number> = {};
const workload = generateWorkload({ blocks: BLOCKS, capacityBlocks: 20_000, seed: 42 });
// Both decoders must agree before their speeds mean anything.
for (const p of workload.payloads.slice(0, 100)) {
  const r = decodeEventBatch(p);
  if (!r.ok) throw new Error(`workload does not decode: ${r.error.message}`);
  if (!isDeepStrictEqual(r.batch.events, genericDecode(p))) throw new Error("decoders disagree");
}
results.ingest_workload_raw = measure(
  "ingest workload, raw reader",
  workload.payloads,
  workload.blocks,
  decodeEventBatch,
);
results.ingest_workload_generic = measure(
  "ingest workload, @msgpack Decoder+BigInt",
  workload.payloads,
  workload.blocks,
  genericDecode,
);
for (const [label, o] of [
  ["map events, uint64", { eventForm: "map", hashForm: "uint64" }],
  ["array events, int64", { eventForm: "array", hashForm: "int64" }],
  ["array events, binary 32B", { eventForm: "array", hashForm: "binary" }],
] as const) {
  const { payloads, blocks } = synthetic(o);
  const key = label.replace(/[^a-z0-9]+/gi, "_");
  results[`${key}_raw`] = measure(`${label}, raw reader`, payloads, blocks, decodeEventBatch);
  results[`${key}_generic`] = measure(
    `${label}, @msgpack Decoder+BigInt`,
    payloads,
    blocks,
    genericDecode,
  );
}
console.log(
  JSON.stringify({ bench: "decode", unit: "blocks/s", blocksPerVariant: BLOCKS, ...results }),
);
