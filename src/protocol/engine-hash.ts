/**
 * Engine block hashes: the opaque ids engines put on the wire (wire-formats §4).
 *
 * Engines send them as signed or unsigned 64-bit ints, 16/32-byte binary digests,
 * or strings (Mooncake). A JS number cannot hold a 64-bit int, and BigInts are slow
 * map keys, so every form is normalised to one branded string:
 *
 * - integers: 16 lowercase hex digits of the value as an unsigned 64-bit two's
 *   complement (so -1 and 2^64-1 are the same hash, as they are on the engine);
 * - binary digests: "b:" + lowercase hex of the bytes;
 * - strings: "s:" + the string as sent;
 * - a shared store's hash under a model: "m:" + the model's length + ":" + the model +
 *   the hash's own form (`engineHashInModel`).
 *
 * The three forms cannot collide with each other, equality is `===`, and the value is
 * directly usable as a Map key. The brand keeps it from being mixed up with the
 * router's own block keys (see `src/index/block-key.ts`).
 */

declare const engineHashBrand: unique symbol;

/** An engine's block hash, normalised without loss. Compare with `===`. */
export type EngineBlockHash = string & { readonly [engineHashBrand]: true };

const HEX: string[] = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));
const DIGITS: number[] = Array.from("0123456789abcdef", (c) => c.charCodeAt(0));

/**
 * From the two 32-bit halves of a 64-bit integer (any sign: the bits are what count).
 * On the decode hot path (one call per block): one `fromCharCode` of 16 table lookups is
 * about 20× faster than `toString(16)` + `padStart` per half.
 */
export function engineHashFromU32Pair(hi: number, lo: number): EngineBlockHash {
  const d = DIGITS;
  return String.fromCharCode(
    d[hi >>> 28]!,
    d[(hi >>> 24) & 15]!,
    d[(hi >>> 20) & 15]!,
    d[(hi >>> 16) & 15]!,
    d[(hi >>> 12) & 15]!,
    d[(hi >>> 8) & 15]!,
    d[(hi >>> 4) & 15]!,
    d[hi & 15]!,
    d[lo >>> 28]!,
    d[(lo >>> 24) & 15]!,
    d[(lo >>> 20) & 15]!,
    d[(lo >>> 16) & 15]!,
    d[(lo >>> 12) & 15]!,
    d[(lo >>> 8) & 15]!,
    d[(lo >>> 4) & 15]!,
    d[lo & 15]!,
  ) as EngineBlockHash;
}

/** From a bigint in [-2^63, 2^64). Values outside that range are rejected. */
export function engineHashFromBigInt(value: bigint): EngineBlockHash {
  if (value < -(1n << 63n) || value >= 1n << 64n) {
    throw new RangeError(`engine hash ${value} does not fit 64 bits`);
  }
  return BigInt.asUintN(64, value).toString(16).padStart(16, "0") as EngineBlockHash;
}

/** From a safe JS integer (|v| ≤ 2^53 − 1), e.g. a small msgpack int. */
export function engineHashFromSafeInt(value: number): EngineBlockHash {
  if (!Number.isSafeInteger(value))
    throw new RangeError(`engine hash ${value} is not a safe integer`);
  if (value >= 0) {
    return engineHashFromU32Pair(Math.floor(value / 0x1_0000_0000), value >>> 0);
  }
  return engineHashFromBigInt(BigInt(value));
}

/** From a binary digest (vLLM with VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0). */
export function engineHashFromBytes(bytes: Uint8Array): EngineBlockHash {
  let s = "b:";
  for (let i = 0; i < bytes.length; i++) s += HEX[bytes[i]!];
  return s as EngineBlockHash;
}

/** From a string id (Mooncake). The empty string means "unset" there: callers check first. */
export function engineHashFromString(value: string): EngineBlockHash {
  return `s:${value}` as EngineBlockHash;
}

/**
 * A store's block hash qualified by the model it was stored for (Mooncake `model_name`):
 * the same hash stored for two models is two blocks (their KV differs), so a store
 * holder's hash table keeps them apart. The length prefix makes it unambiguous.
 */
export function engineHashInModel(model: string, hash: EngineBlockHash): EngineBlockHash {
  return `m:${model.length}:${model}${hash}` as EngineBlockHash;
}
