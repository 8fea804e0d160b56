/**
 * Active-active replicas sharing predicted load through a real `redis-server`: two full
 * services (real router, HTTP via inject) see each other's routed requests, keep routing
 * when Redis is killed (and say so), and catch up when it returns; a replica that
 * vanishes without a goodbye has its load dropped by its peers and its hash expired.
 * Skipped, with a note, when `redis-server` is not installed.
 */

import { Redis } from "ioredis";
import { afterEach, describe, expect, it } from "vitest";
import { RedisLoadSync } from "../src/replicas/redis-load-sync.js";
import { RemoteLoadBook } from "../src/replicas/remote-load-book.js";
import { encodeEntry, type SharedEntry } from "../src/replicas/wire.js";
import { noopLogger } from "../src/util/log-sink.js";
import { listenJson, startTestService, type TestService, tokens, workers } from "./http-harness.js";
import { freePort, RedisProcess, redisServerPath } from "./redis-helpers.js";

const HAVE_REDIS = redisServerPath() !== null;
if (!HAVE_REDIS) {
  console.warn("replicas-redis.test.ts: redis-server not installed, these tests are SKIPPED");
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function eventually<T>(what: string, f: () => Promise<T> | T, ok: (v: T) => boolean) {
  let last: T | undefined;
  for (let i = 0; i < 400; i++) {
    last = await f();
    if (ok(last)) return last;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`timed out waiting for ${what}; last: ${JSON.stringify(last)}`);
}

const replicaConfig = (url: string, id: string) => ({
  workers: workers(2),
  replicas: { redisUrl: url, id, keyPrefix: "t", heartbeatMs: 50, staleAfterMs: 400 },
});

async function replica(url: string, id: string): Promise<TestService> {
  const s = await startTestService(replicaConfig(url, id));
  cleanups.push(() => s.close());
  return s;
}

async function readyz(s: TestService) {
  const res = await s.app.inject({ method: "GET", url: "/readyz" });
  const body = res.json();
  return (body.replicas ?? body.error?.details?.replicas) as {
    replicaId: string;
    state: string;
    peers: Record<string, number>;
    remoteRequests: number;
    localRequests: number;
    routesWhileDegraded: number;
  };
}

/** A `RedisLoadSync` driven directly (no service), 40 ms heartbeats. */
function directSync(
  url: string,
  id: string,
  keyPrefix: string,
  book: RemoteLoadBook,
  staleAfterMs: number,
  shareKeys?: boolean,
  commandTimeoutMs = 500,
): RedisLoadSync {
  return new RedisLoadSync({
    url,
    replicaId: id,
    keyPrefix,
    heartbeatMs: 40,
    staleAfterMs,
    commandTimeoutMs,
    maxPendingFlushes: 64,
    ...(shareKeys === undefined ? {} : { shareKeys }),
    book,
    nowMs: () => Date.now(),
    logger: noopLogger,
  });
}

/** Request `id` routed now to worker w0#0, its prefill pending (with `prefixKeys`). */
function pendingEntry(id: string, prefixKeys?: Uint32Array): SharedEntry {
  const t = Date.now();
  return {
    id,
    worker: "w0#0" as never,
    prefillTokens: 100,
    blocks: 8,
    addedMs: t,
    prefillEndMs: t + 60_000,
    expiresMs: t + 600_000,
    pending: true,
    ...(prefixKeys === undefined ? {} : { prefixKeys }),
  };
}

async function route(s: TestService, id: string) {
  const res = await s.app.inject({
    method: "POST",
    url: "/v1/route",
    payload: { token_ids: tokens(64), request_id: id },
  });
  expect(res.statusCode).toBe(200);
  return res.json();
}

describe("a replica whose Redis is unreachable from the start", () => {
  it("starts, routes on local state and says it is not in sync", async () => {
    const port = await freePort(); // nothing listens there
    const a = await replica(`redis://127.0.0.1:${port}`, "alone");
    await route(a, "r1");
    await route(a, "r2");
    const s = await readyz(a);
    expect(["connecting", "degraded"]).toContain(s.state);
    expect(s.localRequests).toBe(2);
    expect(s.routesWhileDegraded).toBe(2);
    expect(s.replicaId).toBe("alone");
  });
});

describe.skipIf(!HAVE_REDIS)("replicas sharing load through redis-server", () => {
  it("B routes around what A routed, and sees it finish", async () => {
    const redis = await RedisProcess.start();
    cleanups.push(() => redis.kill());
    const a = await replica(redis.url, "a");
    const b = await replica(redis.url, "b");
    await eventually(
      "a and b to hear each other",
      async () => [await readyz(a), await readyz(b)],
      (v) => v.every((s) => s.state === "synced" && Object.keys(s.peers).length === 1),
    );
    const first = await route(a, "ra");
    await eventually(
      "b to know a's request",
      () => readyz(b),
      (s) => s.remoteRequests === 1,
    );
    const second = await route(b, "rb");
    const seen = second.candidates.find((c: { worker: string }) => c.worker === first.worker.key);
    // A's uncached prefill counts on B as if B had routed it: B goes elsewhere.
    expect(seen.load.pending_prefill_tokens).toBe(first.prefill_tokens);
    expect(second.worker.key).not.toBe(first.worker.key);

    const done = await a.app.inject({ method: "POST", url: "/v1/requests/ra/done" });
    expect(done.statusCode).toBe(200);
    await eventually(
      "b to forget a's request",
      () => readyz(b),
      (s) => s.remoteRequests === 0,
    );
  });

  it("keeps routing when Redis is killed, says so, and catches up when it returns", async () => {
    const redis = await RedisProcess.start();
    cleanups.push(() => redis.kill());
    const a = await replica(redis.url, "a");
    const b = await replica(redis.url, "b");
    await eventually(
      "sync",
      async () => [await readyz(a), await readyz(b)],
      (v) => v.every((s) => s.state === "synced" && Object.keys(s.peers).length === 1),
    );
    await route(a, "before");
    await eventually(
      "b sees a",
      () => readyz(b),
      (s) => s.remoteRequests === 1,
    );

    await redis.kill();
    await eventually(
      "a degraded",
      () => readyz(a),
      (s) => s.state === "degraded",
    );
    // Routing never waits for Redis.
    for (let i = 0; i < 3; i++) await route(a, `down-${i}`);
    await route(b, "down-b");
    const down = await readyz(a);
    expect(down.routesWhileDegraded).toBe(3);
    expect(down.localRequests).toBe(4);
    const metrics = await a.app.inject({ method: "GET", url: "/metrics" });
    expect(metrics.body).toContain('kvrouter_replicas_sync_state{state="degraded"} 1');
    expect(metrics.body).toMatch(/kvrouter_replicas_degraded_routes_total 3/);
    // What B knew of A ages out: a silent peer's load is not served as fact.
    await eventually(
      "b drops silent a",
      () => readyz(b),
      (s) => s.remoteRequests === 0,
    );

    await redis.restart();
    await eventually(
      "a back in sync",
      () => readyz(a),
      (s) => s.state === "synced",
    );
    // B learns all of A's requests, including those routed while Redis was away.
    await eventually(
      "b catches up",
      () => readyz(b),
      (s) => s.remoteRequests === 4,
    );
    await eventually(
      "a catches up",
      () => readyz(a),
      (s) => s.remoteRequests === 1,
    );
  });

  it("a request the per-worker cap forgets stops counting at the peers too", async () => {
    const redis = await RedisProcess.start();
    cleanups.push(() => redis.kill());
    // One worker, at most 2 records: the third route on A forgets A's first request.
    const capped = (id: string) => ({
      ...replicaConfig(redis.url, id),
      workers: workers(1),
      inFlight: { maxPerWorker: 2 },
    });
    const a = await startTestService(capped("a"));
    cleanups.push(() => a.close());
    const b = await startTestService(capped("b"));
    cleanups.push(() => b.close());
    const [httpA, httpB] = [await listenJson(a), await listenJson(b)];
    const sync = async (h: typeof httpA) => {
      const body = await h.get("/readyz");
      return body.replicas ?? body.error?.details?.replicas;
    };
    await eventually(
      "a and b to hear each other",
      async () => [await sync(httpA), await sync(httpB)],
      (v) => v.every((s) => s.state === "synced" && Object.keys(s.peers).length === 1),
    );
    for (const id of ["r1", "r2", "r3"]) {
      const d = await httpA.post("/v1/route", { token_ids: tokens(64), request_id: id });
      expect(d.worker.key).toBe("w0#0");
    }
    // A forgot r1: what it shares is what it counts.
    expect((await sync(httpA)).localRequests).toBe(2);
    await eventually(
      "b to know what a counts",
      () => sync(httpB),
      (s) => s.remoteRequests === 2,
    );
    for (const id of ["r2", "r3"]) await httpA.post(`/v1/requests/${id}/done`, {});
    // Every request A still counted has ended: nothing of A's may weigh on B's worker.
    await eventually(
      "b to forget a's requests",
      () => sync(httpB),
      (s) => s.remoteRequests === 0,
    );
  });

  it("a replica started before Redis hears its peers once Redis is up", async () => {
    const port = await freePort(); // nothing listens there yet
    const url = `redis://127.0.0.1:${port}`;
    const a = await replica(url, "early");
    const httpA = await listenJson(a);
    const sync = async () => {
      const body = await httpA.get("/readyz");
      return body.replicas ?? body.error?.details?.replicas;
    };
    expect(["connecting", "degraded"]).toContain((await sync()).state);
    const redis = await RedisProcess.start(port);
    cleanups.push(() => redis.kill());
    await eventually(
      "a connected",
      () => sync(),
      (s) => s.state === "synced",
    );
    const b = await replica(url, "late");
    await eventually(
      "b synced",
      () => readyz(b),
      (s) => s.state === "synced",
    );
    await route(b, "rb");
    // What b routes now reaches a by b's messages alone: a must be subscribed.
    await eventually(
      "a to know b's request",
      () => sync(),
      (s) => s.remoteRequests === 1 && s.peers.late === 1,
    );
  });

  it("two processes configured with one replica id are reported", async () => {
    const redis = await RedisProcess.start();
    cleanups.push(() => redis.kill());
    const a1 = await replica(redis.url, "same");
    const a2 = await replica(redis.url, "same");
    await eventually(
      "a conflict to be seen",
      async () => [await readyz(a1), await readyz(a2)],
      (v) => v.every((s) => (s as unknown as { idConflicts: number }).idConflicts > 0),
    );
    expect(a1.logs.some((l) => /another process uses this replicas.id/.test(String(l.msg)))).toBe(
      true,
    );
  });

  it("a replica that vanishes without a goodbye loses its load at its peers", async () => {
    const redis = await RedisProcess.start();
    cleanups.push(() => redis.kill());
    const mk = (id: string, book: RemoteLoadBook) => directSync(redis.url, id, "c", book, 300);
    const bookX = new RemoteLoadBook({ staleAfterMs: 300 });
    const bookY = new RemoteLoadBook({ staleAfterMs: 300 });
    const x = mk("x", bookX);
    const y = mk("y", bookY);
    cleanups.push(() => y.close());
    x.start();
    y.start();
    await eventually(
      "x synced",
      () => x.state,
      (s) => s === "synced",
    );
    x.added(pendingEntry("r1"));
    await eventually(
      "y sees r1",
      () => bookY.totals("w0#0" as never).pendingPrefillTokens,
      (v) => v === 100,
    );
    await x.close(false); // no leave message: a crash, as far as peers can tell
    await eventually(
      "y drops x",
      () => bookY.totals("w0#0" as never).activeRequests,
      (v) => v === 0,
    );
    expect(bookY.stats().droppedReplicas).toBe(1);
    const raw = new Redis(redis.url);
    cleanups.push(async () => raw.disconnect());
    await eventually(
      "x's hash expires",
      () => raw.exists("c:replica:x"),
      (n) => n === 0,
    );
  });

  it("a crashed replica's hash read by a peer starting later does not keep it alive longer", async () => {
    const redis = await RedisProcess.start();
    cleanups.push(() => redis.kill());
    const STALE = 800;
    const x = directSync(
      redis.url,
      "x",
      "late",
      new RemoteLoadBook({ staleAfterMs: STALE }),
      STALE,
    );
    x.start();
    await eventually(
      "x synced",
      () => x.state,
      (s) => s === "synced",
    );
    x.added(pendingEntry("r1"));
    const raw = new Redis(redis.url);
    cleanups.push(async () => raw.disconnect());
    await eventually(
      "r1 in x's hash",
      () => raw.hexists("late:replica:x", "r1"),
      (n) => n === 1,
    );
    await x.close(false); // a crash: x's hash stays until it expires
    const crashedAt = Date.now();
    await new Promise((r) => setTimeout(r, STALE / 2));
    // y starts while x's hash is still there: it reads it whole.
    const bookY = new RemoteLoadBook({ staleAfterMs: STALE });
    const y = directSync(redis.url, "y", "late", bookY, STALE);
    cleanups.push(() => y.close());
    y.start();
    const W = "w0#0" as never;
    await eventually(
      "y reads x's request",
      () => bookY.totals(W).activeRequests,
      (n) => n === 1,
    );
    await eventually(
      "y drops x",
      () => bookY.totals(W).activeRequests,
      (n) => n === 0,
    );
    // Within staleAfterMs of x's last write (plus a sweep and some slack), as at every
    // peer that heard x alive — not staleAfterMs after y happened to read its hash.
    expect(Date.now() - crashedAt).toBeLessThan(STALE + 250);
  });

  it("a rewrite announced while a peer is still reading the old hash is read again", async () => {
    const redis = await RedisProcess.start();
    cleanups.push(() => redis.kill());
    const W = "w0#0" as never;
    const raw = new Redis(redis.url);
    cleanups.push(async () => raw.disconnect());
    // What a crashed process of replica x left: a large hash (requests with prompt keys,
    // ~11 MB, so that a read of it takes several event-loop turns to come in).
    const keys = Uint32Array.from({ length: 2 * 4096 }, (_, i) => i * 7919);
    const N = 250;
    const fields: string[] = [];
    for (let i = 0; i < N; i++)
      fields.push(`old-${i}`, encodeEntry(pendingEntry(`old-${i}`, keys)));
    for (let i = 0; i < fields.length; i += 100)
      await raw.hset("rw:replica:x", ...fields.slice(i, i + 100));
    await raw.pexpire("rw:replica:x", 5000);
    await raw.zadd("rw:replicas", Date.now(), "x");
    // y starts and reads x's hash; x restarts meanwhile: it rewrites its hash (empty,
    // nothing in flight) and says so while y's read of the old one is still coming in.
    const bookY = new RemoteLoadBook({ staleAfterMs: 5000 });
    const y = directSync(redis.url, "y", "rw", bookY, 5000, true, 5000);
    cleanups.push(() => y.close());
    y.start();
    // The moment y sends its read (polled every turn, not every 25 ms).
    while (y.status().peerReloads === 0) await new Promise((r) => setImmediate(r));
    const x = directSync(redis.url, "x", "rw", new RemoteLoadBook({ staleAfterMs: 5000 }), 5000);
    cleanups.push(() => x.close());
    x.start();
    await eventually(
      "x's rewrite in place",
      () => raw.exists("rw:replica:x"),
      (n) => n === 0,
    );
    // y is synced once no read is out (it was out since before x's rewrite). None of the
    // old process's requests may stay on y: x is alive and has none.
    await eventually(
      "y synced, holding what x holds now",
      () => [y.state, bookY.totals(W).activeRequests] as const,
      ([state, n]) => state === "synced" && n === 0,
    );
  });

  it("a request id done and routed again in one batch stays in the sender's hash", async () => {
    const redis = await RedisProcess.start();
    cleanups.push(() => redis.kill());
    const x = directSync(redis.url, "x", "again", new RemoteLoadBook({ staleAfterMs: 2000 }), 2000);
    cleanups.push(() => x.close());
    x.start();
    await eventually(
      "x synced",
      () => x.state,
      (s) => s === "synced",
    );
    // A gateway retry: the attempt on w0 failed (done), the same id goes to w1, all in
    // one event-loop turn (one flush).
    x.added(pendingEntry("r1"));
    x.done("r1");
    x.added({ ...pendingEntry("r1"), worker: "w1#0" as never });
    const raw = new Redis(redis.url);
    cleanups.push(async () => raw.disconnect());
    await eventually(
      "the flush",
      () => x.status().publishedOps,
      (n) => n === 3,
    );
    expect(JSON.parse((await raw.hget("again:replica:x", "r1")) ?? "null")?.[1]).toBe("w1#0");
    // A replica reading x's hash (starting, or after a gap) counts it.
    const bookZ = new RemoteLoadBook({ staleAfterMs: 2000 });
    const z = directSync(redis.url, "z", "again", bookZ, 2000);
    cleanups.push(() => z.close());
    z.start();
    await eventually(
      "z reads x's hash",
      () => bookZ.totals("w1#0" as never).activeRequests,
      (n) => n === 1,
    );
  });

  it("a request's prompt keys reach the peers while its prefill is pending, and only then", async () => {
    const redis = await RedisProcess.start();
    cleanups.push(() => redis.kill());
    const mk = (id: string, book: RemoteLoadBook, shareKeys: boolean) =>
      directSync(redis.url, id, "k", book, 1000, shareKeys);
    const books = [0, 1, 2].map(() => new RemoteLoadBook({ staleAfterMs: 1000 }));
    const [x, y, z] = [
      mk("x", books[0]!, true),
      mk("y", books[1]!, true),
      mk("z", books[2]!, false),
    ];
    for (const s of [x, y, z]) {
      cleanups.push(() => s.close());
      s.start();
    }
    await eventually(
      "all synced",
      () => [x.state, y.state, z.state],
      (v) => v.every((s) => s === "synced"),
    );
    const W = "w0#0" as never;
    const keys = Uint32Array.from({ length: 2 * 3000 }, (_, i) => i * 7919); // 48k tokens
    const add = (s: RedisLoadSync, id: string) => s.added(pendingEntry(id, keys));
    add(x, "rx");
    add(z, "rz"); // z is configured not to share keys
    const sharing = (b: RemoteLoadBook, blocks: number) => b.pendingSharing(W, keys, blocks);
    await eventually(
      "y hears both",
      () => books[1]!.totals(W).pendingPrefillTokens,
      (v) => v === 200,
    );
    expect(sharing(books[1]!, 3000)).toBe(100); // x's keys arrived whole; z sent none
    expect(sharing(books[1]!, 1)).toBe(100);
    x.firstToken("rx");
    await eventually(
      "y hears rx's first token",
      () => sharing(books[1]!, 1),
      (v) => v === 0,
    );
    // A full read of x's hash (as after a gap) brings no keys for a finished prefill.
    const raw = new Redis(redis.url);
    cleanups.push(async () => raw.disconnect());
    const stored = await raw.hget("k:replica:x", "rx");
    expect(JSON.parse(stored!)).toHaveLength(8);
  });
});
