import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { MetricsScraper, type ScrapeTarget } from "../src/ingest/metrics-scraper.js";
import { LoadTracker } from "../src/load/load-tracker.js";
import { workerKey } from "../src/protocol/worker.js";

const fixture = (name: string) =>
  readFileSync(new URL(`./fixtures/metrics/${name}`, import.meta.url), "utf8");

type Mode = "ok" | "500" | "hang" | "garbage" | "trickle" | "flood";

/** `gc()` inside a vitest worker (no --expose-gc flag needed). */
function exposeGc(): () => void {
  setFlagsFromString("--expose-gc");
  return runInNewContext("gc") as () => void;
}

/** A real HTTP server on loopback whose /metrics behaviour the test switches. */
async function metricsServer(body: string) {
  const state = { mode: "ok" as Mode, hits: 0, body };
  const hanging: import("node:http").ServerResponse[] = [];
  const timers: NodeJS.Timeout[] = [];
  const server: Server = createServer((req, res) => {
    state.hits++;
    if (req.url?.split("?")[0] !== "/metrics") {
      res.writeHead(404).end();
      return;
    }
    switch (state.mode) {
      case "ok":
        res.writeHead(200, { "content-type": "text/plain; version=0.0.4" }).end(state.body);
        return;
      case "500":
        res.writeHead(500).end("internal error");
        return;
      case "garbage":
        res.writeHead(200).end("<html>not metrics</html>");
        return;
      case "hang":
        hanging.push(res);
        return;
      case "trickle": {
        // Headers at once, then one byte every 10 ms, forever.
        hanging.push(res);
        res.writeHead(200, { "content-type": "text/plain" });
        timers.push(setInterval(() => res.write("#"), 10));
        return;
      }
      case "flood": {
        // An endless body without content-length, as fast as the socket takes it.
        hanging.push(res);
        res.writeHead(200, { "content-type": "text/plain" });
        const chunk = Buffer.alloc(16 * 1024, "#");
        const pump = () => {
          while (!res.destroyed && res.write(chunk)) {}
          if (!res.destroyed) res.once("drain", pump);
        };
        pump();
        return;
      }
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    state,
    url: `http://127.0.0.1:${port}/metrics`,
    close: async () => {
      for (const t of timers) clearInterval(t);
      for (const r of hanging) r.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe("MetricsScraper over real HTTP", () => {
  let srv: Awaited<ReturnType<typeof metricsServer>>;
  let now = 0;
  let tracker: LoadTracker;
  let scraper: MetricsScraper;
  const key = workerKey("w", 1);
  const target = (): ScrapeTarget => ({
    key,
    metricsUrl: srv.url,
    kind: "vllm",
    model: "Qwen/Qwen3-8B",
    dpRank: 1,
    blockSize: 16,
  });

  beforeEach(async () => {
    srv = await metricsServer(fixture("vllm-current.txt"));
    now = 1000;
    tracker = new LoadTracker({ staleAfterMs: 500 });
    // A long timeout: these tests check outcomes, not speed (a loaded machine once took
    // more than 200 ms to answer the first scrape). The deadline tests make their own.
    scraper = new MetricsScraper({ tracker, intervalMs: 20, timeoutMs: 30_000, nowMs: () => now });
  });

  afterEach(async () => {
    await scraper.stop();
    await srv.close();
  });

  it("scrapes the fixture into the tracker, then records failures until stale", async () => {
    scraper.add(target());
    const ok = await scraper.scrapeOnce(key);
    expect(ok).toEqual({
      ok: true,
      snapshot: {
        running: 3,
        waiting: 0,
        kvUsage: 0.0875,
        prefixCacheQueries: 640128,
        prefixCacheHits: 221184,
        blockSize: 16,
        numGpuBlocks: 27350,
        atMs: 1000,
      },
    });
    expect(tracker.view(key, now)).toMatchObject({
      state: "fresh",
      totalSuccesses: 1,
      source: "scrape",
    });

    srv.state.mode = "500";
    now = 1200;
    expect(await scraper.scrapeOnce(key)).toEqual({ ok: false, error: `HTTP 500 from ${srv.url}` });
    expect(tracker.view(key, now)).toMatchObject({ state: "fresh", consecutiveFailures: 1 });

    srv.state.mode = "garbage";
    now = 1500;
    const garbage = await scraper.scrapeOnce(key);
    expect(!garbage.ok && garbage.error).toMatch(/^no vllm load metrics/);
    expect(tracker.view(key, now)).toMatchObject({
      state: "stale",
      stale: true,
      consecutiveFailures: 2,
      lastError: garbage.ok ? null : garbage.error,
    });
    // The last good snapshot is kept for display.
    expect(tracker.view(key, now).snapshot?.running).toBe(3);
    expect(scraper.stats()).toEqual([
      expect.objectContaining({ worker: key, scrapes: 3, errors: 2, consecutiveErrors: 2 }),
    ]);

    srv.state.mode = "ok";
    now = 1600;
    expect((await scraper.scrapeOnce(key)).ok).toBe(true);
    expect(tracker.view(key, now)).toMatchObject({
      state: "fresh",
      consecutiveFailures: 0,
      totalFailures: 2,
    });
  });

  /** A scraper with a short deadline, for the tests of the deadline itself. */
  const shortScraper = (extra: { maxBodyBytes?: number } = {}) =>
    new MetricsScraper({ tracker, intervalMs: 20, timeoutMs: 200, nowMs: () => now, ...extra });

  it("times out a scrape that never answers", async () => {
    srv.state.mode = "hang";
    const s = shortScraper();
    s.add(target());
    const r = await s.scrapeOnce(key);
    await s.stop();
    expect(r).toEqual({ ok: false, error: "timeout after 200 ms" });
    expect(s.stats()[0]!.errors).toBe(1);
  });

  // Bound checks: each scrape must end with the deadline's error. Before the scraper owned
  // its timer, `AbortSignal.any` lost its timeout under GC and these waited for undici's
  // 300 s (the test's own timeout then fails them).
  it("the deadline fires for hanging and trickling workers while GC runs", async () => {
    const gc = exposeGc();
    const gcLoop = setInterval(gc, 2);
    try {
      for (const mode of ["hang", "trickle"] as const) {
        srv.state.mode = mode;
        const s = shortScraper();
        const keys = Array.from({ length: 20 }, (_, i) => workerKey(`${mode}-${i}`, 0));
        // A URL each: ranks of one URL would share one GET (and one deadline).
        for (const [i, k] of keys.entries())
          s.add({ ...target(), key: k, metricsUrl: `${srv.url}?i=${i}` });
        const results = await Promise.all(keys.map((k) => s.scrapeOnce(k)));
        await s.stop();
        expect(results).toEqual(keys.map(() => ({ ok: false, error: "timeout after 200 ms" })));
      }
    } finally {
      clearInterval(gcLoop);
    }
  }, 60_000);

  it("stops reading an endless body at maxBodyBytes", async () => {
    srv.state.mode = "flood";
    const s = new MetricsScraper({
      tracker,
      intervalMs: 20,
      timeoutMs: 30_000,
      nowMs: () => now,
      maxBodyBytes: 64 * 1024,
    });
    s.add(target());
    const r = await s.scrapeOnce(key);
    await s.stop();
    expect(r).toEqual({ ok: false, error: "body exceeds 65536 bytes" });
  });

  it("reports a refused connection", async () => {
    scraper.add(target());
    await srv.close();
    const r = await scraper.scrapeOnce(key);
    expect(!r.ok && r.error).toMatch(/ECONNREFUSED/);
    // Nothing answered: out of the candidates at once, not after load.staleAfterMs.
    expect(tracker.view(key, now)).toMatchObject({
      stale: true,
      unreachable: /^scrape: ECONNREFUSED/,
    });
    srv = await metricsServer(fixture("vllm-current.txt")); // afterEach closes something valid
    scraper.add({ ...target(), metricsUrl: srv.url });
    expect((await scraper.scrapeOnce(key)).ok).toBe(true);
    expect(tracker.view(key, now)).toMatchObject({ stale: false, unreachable: null });
  });

  it("scrapes periodically once started and stops cleanly", async () => {
    scraper.add(target());
    scraper.start();
    await vi.waitFor(() => expect(scraper.stats()[0]!.scrapes).toBeGreaterThanOrEqual(3), {
      timeout: 10_000,
      interval: 10,
    });
    await scraper.stop();
    const attempts = (x = scraper.stats()[0]!) => x.scrapes + x.errors;
    const made = attempts();
    // A request stop() aborted may still reach the server after stop() returns (its bytes
    // were already sent): let those land, then nothing more may come in 10 intervals.
    await new Promise((r) => setTimeout(r, 100));
    const after = srv.state.hits;
    await new Promise((r) => setTimeout(r, 200));
    expect(srv.state.hits).toBe(after);
    expect(attempts()).toBe(made);
    expect(scraper.running).toBe(false);
  });

  it("aborts a hanging scrape on stop and ignores removed targets", async () => {
    srv.state.mode = "hang";
    scraper.add(target());
    const pending = scraper.scrapeOnce(key);
    expect(scraper.remove(key)).toBe(true);
    await scraper.stop();
    expect(await pending).toEqual({ ok: false, error: "scraper stopped" });
    // Removed before completion: not counted in the tracker.
    expect(tracker.view(key, now).totalFailures).toBe(0);
    expect(await scraper.scrapeOnce(key)).toEqual({
      ok: false,
      error: `unknown scrape target ${key}`,
    });
  });

  it("scrapes SGLang and older vLLM expositions", async () => {
    srv.state.body = fixture("sglang.txt");
    scraper.add({
      ...target(),
      kind: "sglang",
      model: "meta-llama/Llama-3.1-8B-Instruct",
      dpRank: 0,
    });
    const s = await scraper.scrapeOnce(key);
    expect(s.ok && s.snapshot).toMatchObject({ running: 12, waiting: 5, kvUsage: 0.28 });
    srv.state.body = fixture("vllm-0.10.txt");
    const v = await scraper.scrapeOnce(key);
    expect(v.ok && v.snapshot).toMatchObject({ running: 4, waiting: 1, kvUsage: 0.2617 });
  });
});

describe("the ranks of one data-parallel engine", () => {
  it("share one GET of the engine's /metrics, each reading its own series", async () => {
    // An 8-rank vLLM engine whose API server takes 200 ms to answer /metrics.
    const ranks = 8;
    let body = "";
    for (let r = 0; r < ranks; r++) {
      const l = `engine="${r}",model_name="m"`;
      body += `vllm:num_requests_running{${l}} ${r}\nvllm:num_requests_waiting{${l}} ${10 + r}\n`;
      body += `vllm:kv_cache_usage_perc{${l}} ${r / 10}\n`;
    }
    let hits = 0;
    const server = createServer((_req, res) => {
      hits++;
      setTimeout(() => res.writeHead(200).end(body), 200);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/metrics`;
    const tracker = new LoadTracker({ staleAfterMs: 5000 });
    const scraper = new MetricsScraper({
      tracker,
      intervalMs: 1000,
      timeoutMs: 700,
      nowMs: () => 0,
    });
    try {
      const keys = Array.from({ length: ranks }, (_, r) => workerKey("dp", r));
      for (const [r, key] of keys.entries()) {
        scraper.add({ key, metricsUrl: url, kind: "vllm", model: "m", dpRank: r, blockSize: 16 });
      }
      const results = await Promise.all(keys.map((k) => scraper.scrapeOnce(k)));
      // One GET per rank queued behind the agent's two sockets: ranks 6 and 7 waited
      // 3 × 200 ms for theirs and missed the 700 ms deadline (marked unreachable).
      expect(results).toEqual(
        keys.map((_, r) => ({
          ok: true,
          snapshot: { running: r, waiting: 10 + r, kvUsage: r / 10, atMs: 0 },
        })),
      );
      expect(hits).toBe(1);
      for (const k of keys) expect(tracker.view(k, 0)).toMatchObject({ unreachable: null });
    } finally {
      await scraper.stop();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it("a rank marked unreachable does not join a GET that began before the mark", async () => {
    let body = "";
    for (let r = 0; r < 2; r++) {
      body += `vllm:num_requests_running{engine="${r}"} 1\nvllm:num_requests_waiting{engine="${r}"} 0\n`;
      body += `vllm:kv_cache_usage_perc{engine="${r}"} 0.5\n`;
    }
    let hits = 0;
    const server = createServer((_req, res) => {
      hits++;
      setTimeout(() => res.writeHead(200).end(body), 100);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/metrics`;
    let now = 1000;
    const tracker = new LoadTracker({ staleAfterMs: 5000 });
    const scraper = new MetricsScraper({
      tracker,
      intervalMs: 1000,
      timeoutMs: 900,
      nowMs: () => now,
    });
    try {
      const [k0, k1] = [workerKey("dp", 0), workerKey("dp", 1)];
      for (const [r, key] of [k0, k1].entries()) {
        scraper.add({ key, metricsUrl: url, kind: "vllm", model: null, dpRank: r, blockSize: 16 });
      }
      const first = scraper.scrapeOnce(k0); // GET out since t = 1000
      now = 1010;
      // A caller could not connect to rank 1; the fleet scrapes it at once to learn more.
      tracker.markUnreachable(k1, "caller", "ECONNREFUSED", now);
      const probe = scraper.scrapeOnce(k1);
      await Promise.all([first, probe]);
      // Joining the GET of t = 1000 would have left rank 1 out until the next round.
      expect(tracker.view(k1, now)).toMatchObject({ unreachable: null, stale: false });
      expect(hits).toBe(2);
    } finally {
      await scraper.stop();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
