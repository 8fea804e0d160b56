/**
 * The worker-thread paths: with a threshold of one character, once the pool is ready every
 * uncached segment is encoded on a worker; with whole requests off the thread (the
 * gateway's default), every request is tokenized on a worker, a conversation on the same
 * one. Both give the engine's ids; close() ends the workers and later calls fail as `closed`.
 */

import { describe, expect, it } from "vitest";
import { EncodePool, QUEUE_CAP_JOBS, QUEUE_CAP_WORK } from "../src/tokenize/encode-pool.js";
import { bundledQwen3Dir, loadModelTokenizer } from "../src/tokenize/index.js";
import { CORPUS, GOLDEN } from "./tokenize-corpus.js";

/** Waits (up to 30 s) until `n` of a pool's threads are ready; how many are. */
async function untilReady(state: () => { readonly ready: number }, n: number): Promise<number> {
  const deadline = Date.now() + 30_000;
  while (state().ready < n && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  return state().ready;
}

/** A pool of `threads` stand-in threads (`worker`, test/fixtures/tokenize) for the Qwen3 files. */
function fixturePool(worker: URL, threads: number, loopUtilization?: () => number): EncodePool {
  return new EncodePool(
    { dir: bundledQwen3Dir(), segmentCacheBytes: 0, mode: "auto", requests: true },
    threads,
    worker,
    loopUtilization === undefined ? undefined : { loopUtilization },
  );
}

/** Tokenizes the whole corpus with `t`, each against its golden ids; the jobs sent to threads. */
async function corpusJobs(t: Awaited<ReturnType<typeof loadModelTokenizer>>): Promise<number> {
  const before = t.poolState().jobs;
  for (const c of CORPUS) {
    const r =
      c.kind === "completion"
        ? await t.tokenizeCompletion(c.prompt)
        : await t.tokenizeChat(c.request);
    expect(r.tokenIds, c.name).toEqual(GOLDEN.get(c.name)!.ids);
  }
  return t.poolState().jobs - before;
}

describe("encode pool", () => {
  it("encodes off-thread with the engine's ids and shuts down cleanly", async () => {
    const t = await loadModelTokenizer(bundledQwen3Dir(), {
      threads: 1,
      offThreadMinChars: 1,
      segmentCacheBytes: 0,
      requestsOffThread: false,
    });
    const first = CORPUS[0]!;
    if (first.kind !== "completion") throw new Error("corpus starts with a completion");
    // The first call starts the worker and is served on this thread meanwhile.
    expect((await t.tokenizeCompletion(first.prompt)).tokenIds).toEqual(
      GOLDEN.get(first.name)!.ids,
    );
    expect(await untilReady(() => t.poolState(), 1)).toBe(1);
    expect(await corpusJobs(t)).toBe(CORPUS.length);
    await t.close();
    expect(t.poolState().started).toBe(0);
    await expect(t.tokenizeCompletion("x")).rejects.toMatchObject({ code: "closed" });
  });
});

describe("whole requests on the pool's threads", () => {
  it("gives the engine's ids, the segment cache per thread, and the same errors", async () => {
    // The gateway's defaults: every request goes whole to a worker once one is ready.
    const t = await loadModelTokenizer(bundledQwen3Dir(), { threads: 2 });
    t.warmThreads();
    expect(await untilReady(() => t.poolState(), 2)).toBe(2);
    // Every request went to a worker; the event loop's own cache never saw one.
    expect(await corpusJobs(t)).toBe(CORPUS.length);
    expect(t.cacheStats()?.entries).toBe(0);
    // A conversation's later turn meets the worker that cached its earlier turns.
    const turns = CORPUS.filter((c) => c.kind === "chat" && c.name.startsWith("chat-turn-"));
    expect(turns.length).toBeGreaterThan(1);
    for (const c of turns) {
      if (c.kind !== "chat") continue;
      const again = await t.tokenizeChat(c.request);
      expect(again.cachedSegments, c.name).toBeGreaterThan(0);
    }
    // Given the request's JSON body, the thread reads the chat from those bytes (the
    // gateway's path: no message objects cloned): the same ids, and the caller's bytes
    // are left as they were (a copy crosses).
    const chats = CORPUS.filter((c) => c.kind === "chat");
    const viaBody = t.poolState().jobs;
    for (const c of chats) {
      if (c.kind !== "chat") continue;
      const body = Buffer.from(JSON.stringify({ model: "m", stream: true, ...c.request }));
      const copy = Buffer.from(body);
      const r = await t.tokenizeChat(c.request, body);
      // The typed ids as they came from the thread (what the gateway routes on), and the
      // array made from them.
      expect(r.onThread).toBe(true);
      expect(Array.from(r.ids!), c.name).toEqual(GOLDEN.get(c.name)!.ids);
      expect(r.tokenIds, c.name).toEqual(GOLDEN.get(c.name)!.ids);
      expect(body.equals(copy)).toBe(true);
    }
    expect(t.poolState().jobs - viaBody).toBe(chats.length);
    await expect(
      t.tokenizeChat({ messages: [{ role: "user", content: "hi" }] }, Buffer.from("{not json")),
    ).rejects.toMatchObject({ code: "bad_request" });
    // A request the template cannot render fails as on the event loop: `bad_request`.
    const bad = { messages: [{ role: "user", content: 5 }] };
    let onLoop: unknown = null;
    try {
      t.tokenizeChatSync(bad);
    } catch (err) {
      onLoop = err;
    }
    expect(onLoop).toMatchObject({ code: "bad_request" });
    await expect(t.tokenizeChat(bad)).rejects.toMatchObject({ code: "bad_request" });
    await t.close();
    await expect(
      t.tokenizeChat(turns[0]!.kind === "chat" ? turns[0]!.request : bad),
    ).rejects.toMatchObject({ code: "closed" });
  }, 120_000);
});

describe("a busy tokenizer thread", () => {
  it("does not hold up a small request behind a large one: that is encoded here", async () => {
    const t = await loadModelTokenizer(bundledQwen3Dir(), { threads: 1, segmentCacheBytes: 0 });
    try {
      await t.tokenizeCompletion("warm up");
      expect(await untilReady(() => t.poolState(), 1)).toBe(1);
      const big = "The quick brown fox jumps over the lazy dog. ".repeat(12_000); // 540k chars
      const order: string[] = [];
      const jobsBefore = t.poolState().jobs;
      const a = t.tokenizeCompletion(big).then(() => order.push("big"));
      const b = t
        .tokenizeChat({ messages: [{ role: "user", content: "hi" }] })
        .then(() => order.push("small"));
      await Promise.all([a, b]);
      expect(order).toEqual(["small", "big"]);
      expect(t.poolState().jobs - jobsBefore).toBe(1); // only the big one went to the thread
    } finally {
      await t.close();
    }
  }, 120_000);
});

describe("the tokenizer thread's queue budget", () => {
  const timed = new URL("./fixtures/tokenize/timed-encode-worker.ts", import.meta.url);
  const job = (prompt: string) => ({ kind: "completion" as const, prompt });
  /** Jobs of 30k characters, the size of an 8k-token chat, under the 64k-character threshold. */
  const CHARS = 30_000;
  const SMALL = 64 * 1024;
  /** One thread answering as the test times it; the event loop's utilization as given. */
  const timedPool = (loopUtilization?: () => number) => fixturePool(timed, 1, loopUtilization);
  const ready = async (pool: EncodePool) => {
    pool.warm();
    await untilReady(() => pool.state(), 1);
  };

  it("queues ordinary requests by the thread's time, not by their characters", async () => {
    // The event loop's utilization, as the test sets it (not this machine's load).
    let utilization = 0;
    const pool = timedPool(() => utilization);
    try {
      await ready(pool);
      // The thread takes 0.3 ms per such job (a chat whose history it has cached).
      for (let i = 0; i < 25; i++) await pool.tryRun(job("teach:0.3"), 0, CHARS, SMALL);
      // 16 of them wait together (480k characters, ~5 ms of the thread's time): all go
      // to the thread; the 256k-character budget of before sent the ninth on to the event loop.
      const queued = Array.from({ length: 16 }, () => pool.tryRun(job("chat"), 0, CHARS, SMALL));
      expect(queued.filter((q) => q === null)).toHaveLength(0);
      await pool.tryRun(job("release"), 0, SMALL, SMALL);
      await Promise.all(queued);
      // A thread that takes 30 ms per such job: two queued (~60 ms) are past the budget,
      // so the next one is tokenized by the caller (an event loop with time to spare); a
      // large job still goes to the thread.
      for (let i = 0; i < 25; i++) await pool.tryRun(job("teach:30"), 0, CHARS, SMALL);
      const held = [pool.tryRun(job("a"), 0, CHARS, SMALL), pool.tryRun(job("b"), 0, CHARS, SMALL)];
      expect(held.filter((q) => q === null)).toHaveLength(0);
      expect(pool.tryRun(job("c"), 0, CHARS, SMALL)).toBeNull();
      // Unless the event loop is itself busy (active over half its time): then it takes no
      // tokenization on, and the request waits for the thread.
      utilization = 0.9;
      const busy = pool.tryRun(job("e"), 0, CHARS, SMALL);
      expect(busy).not.toBeNull();
      held.push(busy);
      const large = pool.tryRun(job("large"), 0, SMALL, SMALL);
      expect(large).not.toBeNull();
      await pool.tryRun(job("release"), 0, SMALL, SMALL);
      await Promise.all([...held, large]);
      utilization = 0;
      // Nothing queued: the next one goes to the thread again.
      const next = pool.tryRun(job("d"), 0, CHARS, SMALL);
      expect(next).not.toBeNull();
      await pool.tryRun(job("release"), 0, SMALL, SMALL);
      await next;
    } finally {
      await pool.close();
    }
  }, 60_000);
  it("caps the thread's queued work however busy the event loop, and however warm the rate", async () => {
    let utilization = 0;
    const pool = timedPool(() => utilization);
    /** How many of `n` ordinary jobs queued together the thread takes. */
    const accepted = async (n: number) => {
      const qs = Array.from({ length: n }, () => pool.tryRun(job("chat"), 0, CHARS, SMALL));
      await pool.tryRun(job("release"), 0, SMALL, SMALL);
      await Promise.all(qs);
      return qs.filter((q) => q !== null).length;
    };
    const cap = Math.floor(QUEUE_CAP_WORK / CHARS) + 1; // 18 jobs of 30k
    try {
      await ready(pool);
      // A rate learned from cached chats (0.3 ms each) puts ~130 of them under the 40 ms
      // budget; cold ones take 60 times that: a burst of them is held to the cap.
      for (let i = 0; i < 25; i++) await pool.tryRun(job("teach:0.3"), 0, CHARS, SMALL);
      expect(await accepted(100)).toBe(cap);
      // A busy event loop skips the ms budget (slow jobs: 30 ms each), not the cap: it
      // took all 1000 before.
      for (let i = 0; i < 25; i++) await pool.tryRun(job("teach:30"), 0, CHARS, SMALL);
      expect(await accepted(3)).toBe(2);
      utilization = 0.9;
      expect(await accepted(1000)).toBe(cap);
    } finally {
      await pool.close();
    }
  }, 60_000);

  it("learns the thread's rate from what it reads: a tiny tools-heavy chat does not skew it", async () => {
    const pool = timedPool();
    /** How many of 16 ordinary jobs queued together the thread takes. */
    const accepted = async () => {
      const qs = Array.from({ length: 16 }, () => pool.tryRun(job("chat"), 0, CHARS, SMALL));
      await pool.tryRun(job("release"), 0, SMALL, SMALL);
      await Promise.all(qs);
      return qs.filter((q) => q !== null).length;
    };
    try {
      await ready(pool);
      for (let i = 0; i < 25; i++) await pool.tryRun(job("teach:0.3"), 0, CHARS, SMALL);
      expect(await accepted()).toBe(16);
      // A chat of 8 characters of text that took the thread 5 ms (40 tools' JSON, the
      // template, the body's parse): sized by its text alone it read as ~10^4 times the
      // rate, and the thread then took 1 of 16 ordinary jobs for a dozen rounds.
      await pool.tryRun(job("teach:5"), 0, 8, SMALL);
      expect(await accepted()).toBe(16);
      // Sized by its body's bytes (what the thread parses), it moves the rate a little.
      await pool.tryRun(job("teach:5"), 0, 8, SMALL, 20_000);
      expect(await accepted()).toBe(16);
      // One large job that took the thread far longer than its size says (a 5 s stall):
      // its sample is clamped to 4 times the rate, so ordinary jobs still queue. Unclamped,
      // the rate would jump ~400 times and the thread take 1 of 16. (The answered jobs
      // above taught a rate near zero: it is taught again first.)
      for (let i = 0; i < 25; i++) await pool.tryRun(job("teach:0.3"), 0, CHARS, SMALL);
      await pool.tryRun(job("teach:5000"), 0, CHARS, SMALL, 20_000);
      expect(await accepted()).toBe(16);
    } finally {
      await pool.close();
    }
  }, 60_000);

  it("counts every job's fixed cost: tiny jobs neither pass the budget for free nor queue by the thousand", async () => {
    let utilization = 0;
    const pool = timedPool(() => utilization);
    /** How many of `n` two-character completions queued together the thread takes. */
    const accepted = async (n: number) => {
      const qs = Array.from({ length: n }, () => pool.tryRun(job("hi"), 0, 2, SMALL));
      await pool.tryRun(job("release"), 0, SMALL, SMALL);
      await Promise.all(qs);
      return qs.filter((q) => q !== null).length;
    };
    try {
      await ready(pool);
      // 1 µs per character (30 ms per 30k job): a tiny job is estimated as 256 characters'
      // worth, ~0.26 ms, so about 40 / 0.26 of them fit the 40 ms budget — not all.
      for (let i = 0; i < 25; i++) await pool.tryRun(job("teach:30"), 0, CHARS, SMALL);
      const idle = await accepted(1000);
      expect(idle).toBeGreaterThan(100);
      expect(idle).toBeLessThan(QUEUE_CAP_JOBS);
      // A busy event loop skips the ms budget: the job cap holds them (it took all 1000).
      utilization = 0.9;
      expect(await accepted(1000)).toBe(QUEUE_CAP_JOBS);
    } finally {
      await pool.close();
    }
  }, 60_000);
});

describe("a tokenizer thread that dies", () => {
  it("fails its job as `closed` and leaves the pool, which starts another", async () => {
    const dying = new URL("./fixtures/tokenize/dying-encode-worker.ts", import.meta.url);
    const pool = fixturePool(dying, 1);
    try {
      pool.warm();
      await untilReady(() => pool.state(), 1);
      const job = pool.tryRun({ kind: "completion", prompt: "hello" }, 0);
      expect(job).not.toBeNull();
      await expect(job).rejects.toMatchObject({ code: "closed" });
      expect(pool.state()).toMatchObject({ started: 0, deaths: 1 });
      // Not restarted at once (a thread that cannot load is not restarted per request):
      // the caller tokenizes itself meanwhile.
      expect(pool.tryRun({ kind: "completion", prompt: "hello" }, 0)).toBeNull();
      expect(pool.state().started).toBe(0);
      // After the delay (1 s after a first death) a replacement starts.
      await new Promise((r) => setTimeout(r, 1100));
      expect(pool.tryRun({ kind: "completion", prompt: "hello" }, 0)).toBeNull();
      expect(pool.state().started).toBe(1);
    } finally {
      await pool.close();
    }
  }, 60_000);

  it("fails only its own jobs: another thread's job goes on", async () => {
    const dying = new URL("./fixtures/tokenize/dying-encode-worker.ts", import.meta.url);
    const pool = fixturePool(dying, 2);
    try {
      pool.warm();
      await untilReady(() => pool.state(), 2);
      const slow = pool.tryRun({ kind: "completion", prompt: "slow" }, 1); // thread 1
      const dies = pool.tryRun({ kind: "completion", prompt: "x" }, 0); // thread 0
      await expect(dies).rejects.toMatchObject({ code: "closed" });
      await expect(slow).resolves.toMatchObject({ cached: 0 });
      expect(pool.state()).toMatchObject({ started: 1, deaths: 1 });
      // A request that cannot cross to a thread fails as a bad request, leaving nothing
      // waiting and nothing counted.
      const jobs = pool.state().jobs;
      const bad = pool.tryRun(
        {
          kind: "chat",
          request: { messages: [], chat_template_kwargs: { f: () => 1 } },
        } as unknown as Parameters<EncodePool["tryRun"]>[0],
        1,
      );
      await expect(bad).rejects.toMatchObject({ code: "bad_request" });
      expect(pool.state().jobs).toBe(jobs);
    } finally {
      await pool.close();
    }
  }, 60_000);
});
