/**
 * Token ids for trace requests. Traces carry no tokens, only one id per 512-token block,
 * and a hash_id already identifies the whole prefix up to its block. So a block's tokens
 * can be a pure function of its hash_id: equal ids give equal tokens, different ids give
 * (with overwhelming probability) different ones, and two requests share a token prefix
 * exactly as far as their hash_ids agree. The last, partial block is cut to the
 * request's input length.
 */

import { fmix32 } from "../util/fmix32.js";
import { TRACE_BLOCK_TOKENS, type TraceRequest } from "./trace.js";

/** Token ids are drawn from [0, VOCAB_SIZE), the size of a typical modern vocabulary. */
export const VOCAB_SIZE = 1 << 17;

/**
 * Write the first `count` tokens of block `hashId` into `out` at `offset`.
 * A xorshift32 stream seeded from the id; deterministic across runs and machines.
 */
export function writeBlockTokens(
  hashId: number,
  out: number[],
  offset: number,
  count: number,
): void {
  const lo = hashId >>> 0;
  const hi = Math.floor(hashId / 0x1_0000_0000) >>> 0;
  let s = fmix32(lo ^ fmix32(hi + 0x9e3779b9)) || 0x6d2b79f5;
  const mask = VOCAB_SIZE - 1;
  for (let i = 0; i < count; i++) {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    out[offset + i] = (s >>> 0) & mask;
  }
}

/** The `TRACE_BLOCK_TOKENS` token ids of one trace block. */
export function blockTokens(hashId: number, blockTokensCount = TRACE_BLOCK_TOKENS): number[] {
  const out = new Array<number>(blockTokensCount);
  writeBlockTokens(hashId, out, 0, blockTokensCount);
  return out;
}

/**
 * A request's prompt: its blocks' tokens back to back, cut to `inputLength`. A plain
 * array of small integers, which consumers copy (`Array.from`) far faster than a typed
 * array.
 */
export function requestTokens(
  req: Pick<TraceRequest, "inputLength" | "hashIds">,
  traceBlockTokens = TRACE_BLOCK_TOKENS,
): number[] {
  const out = new Array<number>(req.inputLength);
  for (let b = 0; b < req.hashIds.length; b++) {
    const offset = b * traceBlockTokens;
    const count = Math.min(traceBlockTokens, req.inputLength - offset);
    if (count <= 0) break;
    writeBlockTokens(req.hashIds[b]!, out, offset, count);
  }
  return out;
}
