/**
 * Gateway mode when things go wrong, over real HTTP on loopback: retries before the first
 * byte (a worker refusing connections, one answering 503, one never answering), the
 * per-worker circuit breaker (opens, excludes, half-opens on a trial, closes), a client
 * that disconnects mid-stream (the simulated engine sees the cancellation and frees its
 * slot), the admission queue (429 + Retry-After when full or past its deadline, admitted
 * when capacity frees). Every case ends with nothing in flight.
 */

import { describe, expect, it } from "vitest";
import type { SimWorkerHandle } from "../src/sim/sim-worker.js";
import {
  circuitOf,
  inFlightTotal,
  metricValue,
  plainEntry,
  pushLoad,
  type RunningGateway,
  refusedPort,
  type ScriptedWorker,
  simEntry,
  startGateway,
  startScripted,
  startSim,
  until,
} from "./gateway-harness.js";
import { closersAfterEach } from "./http-harness.js";

const BODY = { model: "sim-model", prompt: [11, 12, 13, 14, 15, 16, 17, 18], max_tokens: 2 };
const OK_JSON = '{"id":"cmpl-a","object":"text_completion","choices":[]}';

const cleanup = closersAfterEach();

async function gateway(raw: Record<string, unknown>): Promise<RunningGateway> {
  const gw = await startGateway(raw);
  cleanup.push(() => gw.close());
  return gw;
}
async function sim(extra: string[] = []): Promise<SimWorkerHandle> {
  const s = await startSim(extra);
  cleanup.push(() => s.close());
  return s;
}
async function scripted(
  handler: Parameters<typeof startScripted>[0],
  port?: number,
): Promise<ScriptedWorker> {
  const w = await startScripted(handler, port);
  cleanup.push(() => w.close());
  return w;
}

async function post(url: string, body: unknown = BODY) {
  const res = await fetch(`${url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { res, text: await res.text() };
}

async function metrics(url: string): Promise<string> {
  return (await fetch(`${url}/metrics`)).text();
}

/** Worker `id`'s circuit state. */
const stateOf = async (url: string, id: string) => (await circuitOf(url, id)).state;

describe("gateway: retries before the first byte", () => {
  it("a worker refusing connections is retried on the next best", async () => {
    const port = await refusedPort();
    const b = await sim();
    const gw = await gateway({
      workers: [plainEntry("a", `http://127.0.0.1:${port}`), simEntry("b", b)],
    });
    await pushLoad(gw.url, "b", 30);
    const r = await post(gw.url);
    expect(r.res.status, r.text).toBe(200);
    expect(r.res.headers.get("x-kvrouter-worker")).toBe("b#0");
    const m = await metrics(gw.url);
    expect(
      metricValue(m, "kvrouter_gateway_attempts_total", { worker: "a#0", result: "connect" }),
    ).toBe(1);
    expect(metricValue(m, "kvrouter_gateway_retries_total")).toBe(1);
    expect(await inFlightTotal(gw.url)).toBe(0);
    // The refusal reached the fleet: the dead worker left the candidates of every caller
    // at once (the idle-looking `a` would otherwise win each decision over the loaded `b`).
    const view = (await (await fetch(`${gw.url}/v1/workers`)).json()) as {
      workers: { id: string; ranks: { load: { unreachable: string | null } }[] }[];
    };
    const a = view.workers.find((w) => w.id === "a")!;
    expect(a.ranks[0]!.load.unreachable).toMatch(/ECONNREFUSED/);
    for (let i = 0; i < 5; i++) {
      const d = await fetch(`${gw.url}/v1/route`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ token_ids: BODY.prompt, model: "sim-model" }),
      });
      expect(((await d.json()) as { worker: { id: string } }).worker.id).toBe("b");
    }
  });

  it("a worker answering 503 is retried elsewhere; one never answering times out and is too", async () => {
    const failing = await scripted((_r, res) => {
      res.writeHead(503, { "content-type": "application/json" });
      res.end('{"error":"overloaded"}');
    });
    const silent = await scripted(() => {}); // never answers
    const b = await sim();
    const gw = await gateway({
      workers: [plainEntry("a", failing.url), plainEntry("s", silent.url), simEntry("b", b)],
      gateway: { firstByteTimeoutMs: 1000, retryBackoffMs: 1 },
    });
    await pushLoad(gw.url, "b", 30);
    await pushLoad(gw.url, "s", 10);
    const r = await post(gw.url);
    expect(r.res.status, r.text).toBe(200);
    expect(r.res.headers.get("x-kvrouter-worker")).toBe("b#0");
    expect(failing.requests.length).toBe(1);
    expect(silent.requests.length).toBe(1);
    const m = await metrics(gw.url);
    expect(
      metricValue(m, "kvrouter_gateway_attempts_total", { worker: "a#0", result: "status_5xx" }),
    ).toBe(1);
    expect(
      metricValue(m, "kvrouter_gateway_attempts_total", { worker: "s#0", result: "timeout" }),
    ).toBe(1);
    expect(await inFlightTotal(gw.url)).toBe(0);
  });

  it("never the same worker twice in a row: with one worker, its failure is the answer (502)", async () => {
    const failing = await scripted((_r, res) => {
      res.writeHead(500);
      res.end("boom");
    });
    const gw = await gateway({ workers: [plainEntry("a", failing.url)] });
    const r = await post(gw.url);
    expect(r.res.status).toBe(502);
    const err = JSON.parse(r.text).error;
    expect(err.code).toBe("upstream_error");
    expect(err.message).toContain("HTTP 500 boom");
    expect(err.message).toContain("after 1 attempt(s)");
    expect(failing.requests.length).toBe(1);
    // No second attempt was sent: none is counted.
    expect(metricValue(await metrics(gw.url), "kvrouter_gateway_retries_total")).toBe(0);
    expect(await inFlightTotal(gw.url)).toBe(0);
  });
});

describe("gateway: per-worker circuit breaker", () => {
  it("opens after consecutive failures, excludes, half-opens on a trial, closes", async () => {
    // 503s open the circuit (a refused connection would take the worker out of the fleet's
    // candidates instead: see "a worker refusing connections" above).
    let release: () => void = () => {};
    const held = new Promise<void>((r) => {
      release = r;
    });
    let failing = true;
    const a = await scripted((_r, res) => {
      if (failing) {
        res.writeHead(503, { "content-type": "application/json" }).end('{"error":"down"}');
        return;
      }
      // a comes back, slow to answer: the trial request half-opens its circuit.
      void held.then(() => {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(OK_JSON);
      });
    });
    const b = await sim();
    const gw = await gateway({
      workers: [plainEntry("a", a.url), simEntry("b", b)],
      // Long enough that the checks of the open state finish first on a loaded machine.
      gateway: { breakerFailures: 2, breakerHalfOpenAfterMs: 1500, retryBackoffMs: 1 },
    });
    await pushLoad(gw.url, "b", 30);
    const attemptsOnA = async () =>
      metricValue(await metrics(gw.url), "kvrouter_gateway_attempts_total", {
        worker: "a#0",
        result: "status_5xx",
      });
    for (let i = 0; i < 2; i++) {
      const r = await post(gw.url);
      expect(r.res.status, r.text).toBe(200);
    }
    expect(await attemptsOnA()).toBe(2);
    expect(await stateOf(gw.url, "a")).toBe("open");
    expect(
      metricValue(await metrics(gw.url), "kvrouter_gateway_circuit_state", { worker: "a" }),
    ).toBe(1);
    // Open: a is excluded, requests go straight to b.
    const direct = await post(gw.url);
    expect(direct.res.headers.get("x-kvrouter-worker")).toBe("b#0");
    expect(await attemptsOnA()).toBe(2);

    failing = false;
    await new Promise((r) => setTimeout(r, 1600));
    const trial = post(gw.url);
    await until("half-open", async () => (await stateOf(gw.url, "a")) === "half_open");
    // While the trial runs, nobody else is routed to a.
    const during = await post(gw.url);
    expect(during.res.headers.get("x-kvrouter-worker")).toBe("b#0");
    release();
    const t = await trial;
    expect(t.res.status).toBe(200);
    expect(t.text).toBe(OK_JSON);
    expect(t.res.headers.get("x-kvrouter-worker")).toBe("a#0");
    expect(await stateOf(gw.url, "a")).toBe("closed");
    expect((await post(gw.url)).res.headers.get("x-kvrouter-worker")).toBe("a#0");
    expect(await inFlightTotal(gw.url)).toBe(0);
  });
});

describe("gateway: client disconnects", () => {
  it("aborting mid-stream cancels the upstream request; the engine frees its slot", async () => {
    const s = await sim(["--decode-ms-per-token", "20"]);
    const gw = await gateway({ workers: [simEntry("s", s)] });
    const ac = new AbortController();
    const res = await fetch(`${gw.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ ...BODY, max_tokens: 1000, stream: true }),
      signal: ac.signal,
    });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    const first = await reader.read();
    expect(new TextDecoder().decode(first.value)).toContain("data: ");
    expect(s.engine.counters().running).toBe(1);
    ac.abort();
    await until("the engine aborted the request", () => s.engine.counters().aborted === 1);
    expect(s.engine.counters().running).toBe(0);
    expect(s.engine.counters().generationTokens).toBeLessThan(1000);
    await until("no request in flight", async () => (await inFlightTotal(gw.url)) === 0);
    const m = await metrics(gw.url);
    expect(
      metricValue(m, "kvrouter_gateway_upstream_aborts_total", { reason: "client_gone" }),
    ).toBe(1);
    expect(metricValue(m, "kvrouter_gateway_requests_total", { outcome: "aborted" })).toBe(1);
  });

  it("aborting before the first byte (non-streaming) cancels the upstream request too", async () => {
    const s = await sim(["--decode-ms-per-token", "20"]);
    const gw = await gateway({ workers: [simEntry("s", s)] });
    const ac = new AbortController();
    const pending = fetch(`${gw.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ ...BODY, max_tokens: 1000 }),
      signal: ac.signal,
    }).catch((err: unknown) => err);
    await until("the engine runs it", () => s.engine.counters().running === 1);
    ac.abort();
    expect(await pending).toBeInstanceOf(Error);
    await until("the engine aborted the request", () => s.engine.counters().aborted === 1);
    await until("no request in flight", async () => (await inFlightTotal(gw.url)) === 0);
    const m = await metrics(gw.url);
    expect(metricValue(m, "kvrouter_gateway_requests_total", { outcome: "aborted" })).toBe(1);
    // The client leaving says nothing about the worker.
    expect(metricValue(m, "kvrouter_gateway_circuit_state", { worker: "s" })).toBe(0);
  });

  it("a worker that dies mid-stream: the client's stream is cut, nothing stays in flight", async () => {
    const dying = await scripted((_r, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write('data: {"x":1}\n\n');
      setTimeout(() => res.socket?.destroy(), 30);
    });
    const gw = await gateway({ workers: [plainEntry("d", dying.url)] });
    const res = await fetch(`${gw.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ ...BODY, stream: true }),
    });
    expect(res.status).toBe(200);
    await expect(res.text()).rejects.toThrow();
    await until("no request in flight", async () => (await inFlightTotal(gw.url)) === 0);
    expect(
      metricValue(await metrics(gw.url), "kvrouter_gateway_upstream_aborts_total", {
        reason: "upstream_error",
      }),
    ).toBe(1);
  });
});

describe("gateway: admission under overload", () => {
  it("queues while every worker is busy: 429 + Retry-After when full or late, admitted when load drops", async () => {
    const w = await scripted((_r, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(OK_JSON);
    });
    const gw = await gateway({
      workers: [plainEntry("w", w.url)],
      gateway: { busyWaiting: 2, queueSize: 1, queueTimeoutMs: 1500 },
    });
    await pushLoad(gw.url, "w", 5);
    const queued = post(gw.url);
    await until(
      "one request queued",
      async () => metricValue(await metrics(gw.url), "kvrouter_gateway_queue_depth") === 1,
    );
    const full = await post(gw.url);
    expect(full.res.status).toBe(429);
    expect(full.res.headers.get("retry-after")).toMatch(/^\d+$/);
    const err = JSON.parse(full.text).error;
    expect(err).toMatchObject({ code: "rate_limited", type: "rate_limit_error", param: null });
    const late = await queued;
    expect(late.res.status).toBe(429);
    expect(JSON.parse(late.text).error.message).toContain("gateway.queueTimeoutMs");
    expect(w.requests.length).toBe(0);

    const admitted = post(gw.url);
    await until(
      "queued again",
      async () => metricValue(await metrics(gw.url), "kvrouter_gateway_queue_depth") === 1,
    );
    await pushLoad(gw.url, "w", 0);
    const ok = await admitted;
    expect(ok.res.status).toBe(200);
    const m = await metrics(gw.url);
    expect(metricValue(m, "kvrouter_gateway_queue_rejections_total", { reason: "full" })).toBe(1);
    expect(metricValue(m, "kvrouter_gateway_queue_rejections_total", { reason: "timeout" })).toBe(
      1,
    );
    expect(metricValue(m, "kvrouter_gateway_queue_wait_seconds_count")).toBe(1);
    expect(await inFlightTotal(gw.url)).toBe(0);
  });
});

describe("gateway: predict-on-route after an attempt the engine never took", () => {
  // Three full blocks (block size 16): routed to `a` first, predicted there for 2 s.
  const prompt = Array.from({ length: 48 }, (_, i) => 100 + i);
  for (const status of [503, 400]) {
    it(`a worker that answered ${status} is not credited with the prompt`, async () => {
      const failing = await scripted((_r, res) => {
        res.writeHead(status, { "content-type": "application/json" });
        res.end('{"error":"no"}');
      });
      const b = await sim();
      const gw = await gateway({
        workers: [plainEntry("a", failing.url), simEntry("b", b)],
        gateway: { retryBackoffMs: 1 },
      });
      await pushLoad(gw.url, "b", 30);
      const r = await post(gw.url, { ...BODY, prompt });
      // 503: retried on b; 400: the client gets the worker's answer (not retried).
      expect(r.res.status, r.text).toBe(status === 503 ? 200 : 400);
      expect(failing.requests.length).toBe(1);
      expect(await inFlightTotal(gw.url)).toBe(0);
      const m = await metrics(gw.url);
      expect(metricValue(m, "kvrouter_predicted_blocks_withdrawn_total")).toBe(3);
      // Within the prediction's TTL, the next decision for the prompt sees nothing on a.
      const d = await fetch(`${gw.url}/v1/route`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ token_ids: prompt, model: "sim-model" }),
      });
      const body = (await d.json()) as {
        candidates: { worker: string; predicted_blocks: number; overlap_blocks: { gpu: number } }[];
      };
      const a = body.candidates.find((c) => c.worker === "a#0")!;
      expect(a.predicted_blocks).toBe(0);
      expect(a.overlap_blocks.gpu).toBe(0);
      if (status === 503) {
        // The worker that served it keeps its prediction (or its engine's report).
        const served = body.candidates.find((c) => c.worker === "b#0")!;
        expect(served.overlap_blocks.gpu).toBe(3);
      }
    });
  }
});
