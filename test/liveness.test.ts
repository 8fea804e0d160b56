/**
 * Liveness over real sockets: a worker whose KV event stream disconnects (the engine was
 * killed) leaves the candidate set at once, even while it holds the prompt's prefix, and
 * is back as soon as its stream reconnects; a caller's report of a refused connection
 * (`FleetControl.markUnreachable`, what the gateway calls) does the same until the next
 * successful push or scrape.
 */

import { afterEach, describe, expect, it, vi } from "vitest";
import { EnginePublisher } from "../src/engine/publisher.js";
import { workerKey } from "../src/protocol/worker.js";
import { startTestService, storedFromRoot, type TestService } from "./http-harness.js";
import { emptyBatch } from "./zmq-helpers.js";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const PROMPT = Array.from({ length: 8 * 16 }, (_, i) => 1000 + ((i * 7919) % 50_000));
// biome-ignore lint/suspicious/noExplicitAny: JSON read in assertions only
type Json = Record<string, any>;

async function call(base: string, method: string, path: string, body?: unknown) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: body === undefined ? {} : { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Json };
}

async function listen(svc: TestService): Promise<string> {
  await svc.app.listen({ host: "127.0.0.1", port: 0 });
  const a = svc.app.server.address();
  if (a === null || typeof a === "string") throw new Error("not listening");
  return `http://127.0.0.1:${a.port}`;
}

const bind = (endpoint = "tcp://127.0.0.1:*") =>
  EnginePublisher.bind({ endpoint, replayEndpoint: null, topic: "kv-events" });

/** Bounds a hang; not a timing assertion. */
const WAIT = { timeout: 20_000, interval: 20 };

describe("dead workers leave the candidate set at once", () => {
  it("a disconnected event stream excludes the worker until it reconnects", async () => {
    let e0 = await bind();
    const e1 = await bind();
    cleanups.push(() => e1.close());
    const endpoint = e0.endpoint;
    const svc = await startTestService({
      workers: [e0, e1].map((e, i) => ({
        id: `engine-${i}`,
        url: `http://127.0.0.1:${18100 + i}`,
        eventsEndpoint: e.endpoint,
        replayEndpoint: null,
        topic: "kv-events",
        metricsUrl: null,
      })),
    });
    cleanups.push(() => svc.close());
    const base = await listen(svc);
    // engine-0 holds the whole prompt; both report the same fresh load.
    svc.index.applyEvent(workerKey("engine-0", 0), storedFromRoot(PROMPT, 16, 1000));
    const idle = { running: 0, waiting: 0, kv_usage: 0.1 };
    for (const id of ["engine-0", "engine-1"]) {
      expect((await call(base, "PUT", `/v1/workers/${id}/load`, idle)).status).toBe(200);
    }
    const connected = async (id: string) =>
      (await call(base, "GET", "/v1/workers")).body.workers.find((w: Json) => w.id === id).ranks[0]
        .stream.connected;
    await vi.waitFor(async () => expect(await connected("engine-0")).toBe(true), WAIT);
    const route = async () => (await call(base, "POST", "/v1/route", { token_ids: PROMPT })).body;
    expect((await route()).worker.id).toBe("engine-0");

    // kill: the publisher's socket goes away; the SUB socket sees the disconnect.
    await e0.close();
    await vi.waitFor(async () => expect(await connected("engine-0")).toBe(false), WAIT);
    // From the moment the disconnect is seen, no decision picks engine-0 (before: its
    // pushed load stayed fresh for load.staleAfterMs and it kept winning on its prefix).
    for (let i = 0; i < 5; i++) {
      const d = await route();
      expect(d.worker.id).toBe("engine-1");
      const c0 = d.candidates.find((c: Json) => c.worker === "engine-0#0");
      expect(c0).toMatchObject({ stale: true, excluded: "stale" });
    }
    const view = (await call(base, "GET", "/v1/workers")).body.workers.find(
      (w: Json) => w.id === "engine-0",
    );
    expect(view.ranks[0].load.unreachable).toMatch(/events: kv event stream disconnected/);

    // The engine is back on the same endpoint: the reconnect puts it back at once.
    e0 = await bind(endpoint);
    cleanups.push(() => e0.close());
    await vi.waitFor(async () => {
      e0.publish(emptyBatch());
      expect(await connected("engine-0")).toBe(true);
    }, WAIT);
    expect((await route()).worker.id).toBe("engine-0");
  });

  it("a caller's refused connection excludes the worker until its next push", async () => {
    const svc = await startTestService({
      workers: [0, 1].map((i) => ({
        id: `w${i}`,
        url: `http://127.0.0.1:${18200 + i}`,
        metricsUrl: null,
      })),
    });
    cleanups.push(() => svc.close());
    const base = await listen(svc);
    svc.index.applyEvent(workerKey("w0", 0), storedFromRoot(PROMPT, 16, 1000));
    const idle = { running: 0, waiting: 0, kv_usage: 0.1 };
    for (const id of ["w0", "w1"]) await call(base, "PUT", `/v1/workers/${id}/load`, idle);
    const route = async () => (await call(base, "POST", "/v1/route", { token_ids: PROMPT })).body;
    expect((await route()).worker.id).toBe("w0");
    expect(svc.fleet.markUnreachable(workerKey("w0", 0), "ECONNREFUSED")).toBe(true);
    expect(svc.fleet.markUnreachable(workerKey("nope", 0), "ECONNREFUSED")).toBe(false);
    expect((await route()).worker.id).toBe("w1");
    await call(base, "PUT", "/v1/workers/w0/load", idle);
    expect((await route()).worker.id).toBe("w0");
  });
});
