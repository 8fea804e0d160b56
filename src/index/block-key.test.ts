import { describe, expect, it } from "vitest";
import {
  BLOCK_SEED,
  blockKeyHex,
  chainBlockKeys,
  computeBlockKeys,
  computeBlockKeysFrom,
  rootKey,
} from "./block-key.js";
import { murmur3X86x128 } from "./murmur3.js";
import type { BlockKeySeq } from "./types.js";

const hex = (keys: BlockKeySeq): string[] =>
  Array.from({ length: keys.length / 2 }, (_, i) => blockKeyHex(keys, i));
const words = (h: number[]): string => h.map((x) => x.toString(16).padStart(8, "0")).join("");

/** The spec of docs/block-keys.md, literally: bytes in, MurmurHash3 out. */
function referenceKeys(tokens: number[], blockSize: number, lora: string | null): string[] {
  let [hi, lo] = rootKey(lora);
  const out: string[] = [];
  for (let b = 0; b + blockSize <= tokens.length; b += blockSize) {
    const msg = new DataView(new ArrayBuffer((blockSize + 2) * 4));
    msg.setUint32(0, hi, true);
    msg.setUint32(4, lo, true);
    for (let j = 0; j < blockSize; j++) msg.setUint32(8 + 4 * j, tokens[b + j]! >>> 0, true);
    const h = murmur3X86x128(new Uint8Array(msg.buffer), BLOCK_SEED);
    hi = h[0];
    lo = h[1];
    out.push(words([hi, lo]));
  }
  return out;
}

describe("murmur3X86x128", () => {
  // Published vectors of MurmurHash3_x86_128 (as h1..h4 words).
  it.each([
    ["Hello, world!", 123, "61c9129e5a1aacd7a41621629e37c886"],
    ["Hello, world!", 321, "d5fbdcb3c26c4193045880c5a7170f0f"],
    ["xxxxxxxxxxxxxxxxxxxxxxxxxxxx", 123, "5e40bab278825a164cf929d31fec6047"],
    ["", 123, "fedc524526f3e79926f3e79926f3e799"],
    ["", 0, "00000000000000000000000000000000"],
  ])("hashes %j with seed %i", (input, seed, expected) => {
    expect(words(murmur3X86x128(new TextEncoder().encode(input), seed))).toBe(expected);
  });
});

describe("computeBlockKeys", () => {
  it("pins the algorithm with the test vectors of docs/block-keys.md", () => {
    expect(hex(computeBlockKeys([1, 2, 3, 4, 5, 6, 7, 8, 9], 4, null))).toEqual([
      "3fcc3b7dda900871",
      "1bcbde6dce458db5",
    ]);
    expect(words([...rootKey("sql-adapter")])).toBe("ecc523ae7d56b02c");
    expect(hex(computeBlockKeys([1, 2, 3, 4, 5, 6, 7, 8, 9], 4, "sql-adapter"))).toEqual([
      "902cf158ebe45547",
      "b65a216f3bce4812",
    ]);
    const t32 = Array.from({ length: 32 }, (_, i) => i);
    expect(hex(computeBlockKeys(t32, 16, null))).toEqual(["e13229b03b943a8c", "aeea2c282a1898b9"]);
  });

  it("equals the byte-oriented reference for every block size and tail shape", () => {
    const tokens = Array.from({ length: 70 }, (_, i) => Math.imul(i + 1, 2654435761) >>> 0);
    for (let bs = 1; bs <= 21; bs++) {
      for (const lora of [null, "a", "adapter-ü"]) {
        expect(hex(computeBlockKeys(tokens, bs, lora))).toEqual(referenceKeys(tokens, bs, lora));
      }
    }
  });

  it("ignores a trailing partial block and accepts typed arrays", () => {
    const tokens = [5, 6, 7, 8, 9, 10, 11];
    expect(computeBlockKeys(tokens, 4, null)).toHaveLength(2);
    expect(computeBlockKeys(tokens, 8, null)).toHaveLength(0);
    expect(hex(computeBlockKeys(new Uint32Array(tokens), 2, null))).toEqual(
      hex(computeBlockKeys(tokens, 2, null)),
    );
    expect(hex(computeBlockKeys(new Int32Array([-1, 3]), 2, null))).toEqual(
      hex(computeBlockKeys([0xffffffff, 3], 2, null)),
    );
  });

  it("chains: a key depends on every earlier block, and on the LoRA adapter", () => {
    const a = hex(computeBlockKeys([1, 2, 3, 4, 5, 6], 2, null));
    const b = hex(computeBlockKeys([9, 2, 3, 4, 5, 6], 2, null));
    expect(a.every((k, i) => k !== b[i])).toBe(true);
    const c = hex(computeBlockKeys([1, 2, 3, 4, 7, 7], 2, null));
    expect(c.slice(0, 2)).toEqual(a.slice(0, 2));
    expect(c[2]).not.toBe(a[2]);
    expect(hex(computeBlockKeys([1, 2], 2, ""))).toEqual(hex(computeBlockKeys([1, 2], 2, null)));
    expect(hex(computeBlockKeys([1, 2], 2, "x"))).not.toEqual(
      hex(computeBlockKeys([1, 2], 2, null)),
    );
    expect(hex(computeBlockKeys([1, 2], 2, "x"))).not.toEqual(
      hex(computeBlockKeys([1, 2], 2, "y")),
    );
  });

  it("chains from a given parent exactly as from the root", () => {
    const tokens = Array.from({ length: 48 }, (_, i) => i * 31);
    const all = computeBlockKeys(tokens, 16, "lora");
    const tail = computeBlockKeysFrom([all[0]!, all[1]!], tokens.slice(16), 16);
    expect(hex(tail)).toEqual(hex(all).slice(1));
    const out = new Uint32Array(6).fill(7);
    chainBlockKeys(all[0]!, all[1]!, tokens, 16, 1, 16, out, 2);
    expect([...out]).toEqual([7, 7, all[2], all[3], 7, 7]);
  });

  it("rejects a block size that is not a positive integer", () => {
    expect(() => computeBlockKeys([1, 2], 0, null)).toThrow(RangeError);
    expect(() => computeBlockKeys([1, 2], 1.5, null)).toThrow(/positive integer/);
  });

  it("is well distributed: no collisions and even low/high bits over 65,536 similar blocks", () => {
    // Blocks differing in one small token, the worst case for a weak mixer.
    const n = 65536;
    const tokens = new Uint32Array(n * 4);
    for (let i = 0; i < n; i++) tokens[4 * i + 3] = i;
    const seen = new Set<string>();
    const buckets = [new Uint32Array(256), new Uint32Array(256)];
    const keys = new Uint32Array(2);
    for (let i = 0; i < n; i++) {
      chainBlockKeys(0, 0, tokens, 4 * i, 1, 4, keys, 0);
      seen.add(`${keys[0]}:${keys[1]}`);
      buckets[0]![keys[0]! >>> 24]!++;
      buckets[1]![keys[1]! & 255]!++;
    }
    expect(seen.size).toBe(n);
    for (const b of buckets) {
      // Chi-square with 255 degrees of freedom: 400 is far beyond p = 1e-6 for a fair hash.
      const expected = n / 256;
      const chi = b.reduce((s, c) => s + (c - expected) ** 2 / expected, 0);
      expect(chi).toBeLessThan(400);
    }
  });
});
