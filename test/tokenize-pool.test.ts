/**
 * The worker-thread path: with a threshold of one character, once the pool is ready every
 * uncached segment is encoded on a worker, with the same ids as the engine's; close() ends
 * the workers and later calls fail as `closed`.
 */

import { describe, expect, it } from "vitest";
import { bundledQwen3Dir, loadModelTokenizer } from "../src/tokenize/index.js";
import { CORPUS, GOLDEN } from "./tokenize-corpus.js";

describe("encode pool", () => {
  it("encodes off-thread with the engine's ids and shuts down cleanly", async () => {
    const t = await loadModelTokenizer(bundledQwen3Dir(), {
      threads: 1,
      offThreadMinChars: 1,
      segmentCacheBytes: 0,
    });
    const first = CORPUS[0]!;
    if (first.kind !== "completion") throw new Error("corpus starts with a completion");
    // The first call starts the worker and is served on this thread meanwhile.
    expect((await t.tokenizeCompletion(first.prompt)).tokenIds).toEqual(
      GOLDEN.get(first.name)!.ids,
    );
    const deadline = Date.now() + 20_000;
    while (t.poolState().ready === 0 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 50));
    expect(t.poolState().ready).toBe(1);
    const before = t.poolState().jobs;
    for (const c of CORPUS) {
      const r =
        c.kind === "completion"
          ? await t.tokenizeCompletion(c.prompt)
          : await t.tokenizeChat(c.request);
      expect(r.tokenIds, c.name).toEqual(GOLDEN.get(c.name)!.ids);
    }
    expect(t.poolState().jobs - before).toBe(CORPUS.length);
    await t.close();
    expect(t.poolState().started).toBe(0);
    await expect(t.tokenizeCompletion("x")).rejects.toMatchObject({ code: "closed" });
  });
});
