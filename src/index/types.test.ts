import { describe, expect, it } from "vitest";
import { workerKey } from "../protocol/worker.js";
import { computeBlockKeys } from "./block-key.js";
import { RadixTreeIndex } from "./radix-tree.js";
import type { HashWords, StoredWords, TokenWords } from "./types.js";

describe("the word entry points' array kinds", () => {
  it("cannot be swapped (checked by tsc) and apply through one typed view", () => {
    const hashes = new Uint32Array([0, 1, 0, 2]) as HashWords;
    const tokens = new Uint32Array([1, 2, 3, 4, 5, 6, 7, 8]) as TokenWords;
    // @ts-expect-error token ids are not hash words
    const wrongHashes: HashWords = tokens;
    // @ts-expect-error hash words are not token ids
    const wrongTokens: TokenWords = hashes;
    // @ts-expect-error a plain Uint32Array is neither
    const plain: TokenWords = new Uint32Array(1);
    expect([wrongHashes, wrongTokens, plain]).toHaveLength(3);
    const event: StoredWords = {
      hashes,
      first: 0,
      count: 2,
      tier: "gpu",
      parentPair: -1,
      tokens,
      tokenOffset: 0,
      tokenCount: 8,
      blockSize: 4,
      loraName: null,
      loraId: null,
    };
    const index = new RadixTreeIndex({ blockSize: 4 });
    const w = workerKey("w");
    expect(index.applyStoredWords(w, event).status).toBe("applied");
    const keys = computeBlockKeys([1, 2, 3, 4, 5, 6, 7, 8], 4, null);
    expect(index.findMatches(keys).workers[0]).toMatchObject({ worker: w, gpu: 2 });
    expect(index.applyRemovedWords(w, { hashes, first: 1, count: 1, tier: "gpu" }).status).toBe(
      "applied",
    );
    expect(index.findMatches(keys).workers[0]).toMatchObject({ worker: w, gpu: 1 });
  });
});
