import { describe, expect, it } from "vitest";
import {
  type EngineOptions,
  type RequestOutcome,
  RequestTooLongError,
  SimEngine,
} from "./engine.js";
import type { CacheEvent } from "./kv-cache.js";
import { VirtualClock } from "./timing.js";

const BS = 4;
const OPTS: EngineOptions = {
  prefillTokensPerSec: 1000, // 1 ms per token
  prefillOverheadMs: 5,
  decodeMsPerToken: 10,
  maxNumSeqs: 2,
  maxModelLen: 64,
};

function setup(numBlocks = 32, opts: Partial<EngineOptions> = {}) {
  const clock = new VirtualClock(1_000);
  const batches: CacheEvent[][] = [];
  const next = (t: readonly number[]) => 1000 + t.length; // deterministic "model"
  const engine = new SimEngine(
    { ...OPTS, ...opts },
    { numBlocks, blockSize: BS, seed: 3 },
    clock,
    next,
    (b) => batches.push(b),
  );
  return { clock, engine, batches };
}

interface Trace {
  tokens: number[];
  times: number[];
  outcome: RequestOutcome | null;
}

function submit(
  s: ReturnType<typeof setup>,
  id: string,
  prompt: number[],
  maxTokens: number,
): Trace {
  const t: Trace = { tokens: [], times: [], outcome: null };
  s.engine.submit(
    { id, promptTokens: prompt, maxTokens, loraName: null },
    {
      onToken: (tok) => {
        t.tokens.push(tok);
        t.times.push(s.clock.now());
      },
      onFinish: (o) => {
        t.outcome = o;
      },
    },
  );
  return t;
}

const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

describe("SimEngine", () => {
  it("prefills uncached tokens, then decodes one token per step", () => {
    const s = setup();
    const a = submit(s, "a", range(0, 20), 3);
    s.clock.runAll();
    expect(a.times).toEqual([1025, 1035, 1045]); // 5 ms overhead + 20 tokens, then 10 ms each
    expect(a.tokens).toEqual([1020, 1021, 1022]);
    expect(a.outcome).toEqual({
      reason: "length",
      promptTokens: 20,
      cachedTokens: 0,
      completionTokens: 3,
    });

    // Same prompt again: 16 tokens cached (the last block holds the last prompt token).
    const b = submit(s, "b", range(0, 20), 1);
    const start = s.clock.now();
    s.clock.runAll();
    expect(b.times).toEqual([start + 5 + 4]);
    expect(b.outcome!.cachedTokens).toBe(16);
    expect(s.engine.counters()).toMatchObject({
      running: 0,
      waiting: 0,
      finished: 2,
      promptTokens: 40,
      generationTokens: 4,
    });
  });

  it("prefills one prompt at a time, first come first served, decoding beside it", () => {
    const s = setup();
    const a = submit(s, "a", range(0, 20), 3);
    const b = submit(s, "b", range(100, 12), 2);
    // a prefills; b waits for the prefill server (no slot, no blocks yet).
    expect(s.engine.counters()).toMatchObject({ running: 1, waiting: 1 });
    expect(s.engine.cache.usage()).toBeCloseTo(5 / 31);
    s.clock.runAll();
    const t1 = 1000 + 5 + 20;
    const t2 = t1 + 5 + 12;
    expect(a.times[0]).toBe(t1);
    expect(b.times[0]).toBe(t2);
    // a decodes while b prefills: its second token comes before b's first.
    expect(a.times).toEqual([t1, t1 + 10, t1 + 20]);
    expect(a.times[1]).toBeLessThan(t2);
    expect(b.times).toEqual([t2, t2 + 10]);
  });

  it("shortens a queued prompt's prefill by its cache hit only", () => {
    const s = setup();
    submit(s, "warm", range(0, 20), 1);
    s.clock.runAll();
    const start = s.clock.now();
    const cold = submit(s, "cold", range(100, 12), 1);
    const hit = submit(s, "hit", range(0, 20), 1); // 16 of 20 tokens cached
    s.clock.runAll();
    expect(cold.times).toEqual([start + 5 + 12]);
    expect(hit.times).toEqual([start + 5 + 12 + 5 + 4]);
    expect(hit.outcome!.cachedTokens).toBe(16);
  });

  it("limits running sequences and serves the waiting queue in order", () => {
    const s = setup();
    const a = submit(s, "a", range(0, 10), 10);
    const b = submit(s, "b", range(100, 10), 10);
    const c = submit(s, "c", range(200, 10), 2);
    s.clock.advance(50); // a and b prefilled and decoding: both slots taken
    expect(s.engine.counters()).toMatchObject({ running: 2, waiting: 1 });
    s.clock.runAll();
    expect(b.times[0]).toBe(a.times[0]! + 15);
    // c's prefill starts when a finishes and frees a slot.
    expect(c.times[0]).toBe(a.times.at(-1)! + 15);
    expect([a.times[0], b.times[0], c.times[0]]).toEqual([1015, 1030, 1120]);
  });

  it("holds a request while KV blocks are short and refuses one that can never fit", () => {
    const s = setup(6, { maxNumSeqs: 8, maxModelLen: 20 }); // 5 usable blocks = 20 tokens
    expect(() => submit(s, "big", range(0, 18), 3)).toThrow(RequestTooLongError);
    const a = submit(s, "a", range(0, 12), 5); // 3 blocks, 4 by its last token
    const b = submit(s, "b", range(100, 12), 1); // 3 more: waits for a to finish
    s.clock.advance(30); // a is decoding, the prefill server is free
    expect(s.engine.counters()).toMatchObject({ running: 1, waiting: 1 });
    s.clock.runAll();
    expect(b.times[0]).toBe(a.times.at(-1)! + 5 + 12);
    expect(b.outcome!.reason).toBe("length");
  });

  it("preempts the latest sequence when decode runs out of blocks, with the same output", () => {
    const ref = setup(64);
    const r1 = submit(ref, "a", range(0, 6), 10);
    const r2 = submit(ref, "b", range(50, 6), 10);
    ref.clock.runAll();

    const s = setup(7, { maxModelLen: 24 }); // 6 usable blocks, both need 4 at the end
    const a = submit(s, "a", range(0, 6), 10);
    const b = submit(s, "b", range(50, 6), 10);
    s.clock.runAll();
    expect(s.engine.counters().preemptions).toBeGreaterThan(0);
    expect(a.tokens).toEqual(r1.tokens);
    expect(b.tokens).toEqual(r2.tokens);
    expect(a.outcome!.completionTokens).toBe(10);
    expect(b.outcome!.completionTokens).toBe(10);
    expect(s.engine.cache.numFreeBlocks).toBe(6);
  });

  it("flushes cache events as one batch per engine action", () => {
    const s = setup(8, { maxNumSeqs: 4 });
    submit(s, "a", range(0, 9), 1);
    expect(s.batches).toHaveLength(1);
    expect(s.batches[0]!.map((e) => e.type)).toEqual(["stored"]);
    s.clock.runAll();
    submit(s, "b", range(100, 24), 1); // reuses a's freed blocks: removals, then stored
    expect(s.batches).toHaveLength(2);
    const types = s.batches[1]!.map((e) => e.type);
    expect(types.at(-1)).toBe("stored");
    expect(types.filter((t) => t === "removed").length).toBeGreaterThan(0);
    s.clock.runAll();
    expect(s.engine.resetPrefixCache()).toBe(true);
    expect(s.batches.at(-1)).toEqual([{ type: "cleared" }]);
  });

  it("aborts waiting and running requests and frees their blocks", () => {
    const s = setup(16, { maxNumSeqs: 1 });
    const a = submit(s, "a", range(0, 9), 50);
    const b = submit(s, "b", range(100, 9), 5);
    expect(s.engine.resetPrefixCache()).toBe(false);
    s.engine.abort("b");
    expect(b.outcome).toMatchObject({ reason: "abort", completionTokens: 0 });
    s.clock.advance(30);
    s.engine.abort("a");
    expect(a.outcome!.reason).toBe("abort");
    expect(s.engine.cache.numFreeBlocks).toBe(15);
    expect(s.clock.pending).toBe(0);
  });
});
