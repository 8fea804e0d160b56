/**
 * The per-worker circuit breaker where its trial meets other outcomes, over real HTTP on
 * loopback: a trial answered 429 (busy, not broken), and a client abort of a request
 * sent while the circuit was still closed that lands while a trial runs. Neither may
 * make the circuit count failures it did not see.
 */

import { request as httpRequest, type ServerResponse } from "node:http";
import { describe, expect, it } from "vitest";
import type { SimWorkerHandle } from "../src/sim/sim-worker.js";
import {
  circuitOf,
  plainEntry,
  pushLoad,
  type RunningGateway,
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
async function sim(): Promise<SimWorkerHandle> {
  const s = await startSim();
  cleanup.push(() => s.close());
  return s;
}
async function scripted(handler: Parameters<typeof startScripted>[0]): Promise<ScriptedWorker> {
  const w = await startScripted(handler);
  cleanup.push(() => w.close());
  return w;
}

async function post(url: string) {
  const res = await fetch(`${url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(BODY),
  });
  return { res, text: await res.text() };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("gateway: circuit breaker trial races", () => {
  it("a trial answered 429 closes the circuit with its failure count reset", async () => {
    let mode: "503" | "429" = "503";
    const a = await scripted((_r, res) => {
      res.writeHead(Number(mode), { "content-type": "application/json" }).end('{"error":"x"}');
    });
    const b = await sim();
    const gw = await gateway({
      workers: [plainEntry("a", a.url), simEntry("b", b)],
      gateway: { breakerFailures: 2, breakerHalfOpenAfterMs: 300, retryBackoffMs: 1 },
    });
    await pushLoad(gw.url, "b", 30);
    for (let i = 0; i < 2; i++) expect((await post(gw.url)).res.status).toBe(200);
    expect(a.requests.length).toBe(2);
    expect((await circuitOf(gw.url, "a")).state).toBe("open");

    await sleep(350);
    mode = "429";
    expect((await post(gw.url)).res.status).toBe(200);
    expect(a.requests.length).toBe(3); // the trial went to a, its 429 was retried on b
    expect(await circuitOf(gw.url, "a")).toEqual(
      expect.objectContaining({ state: "closed", consecutive_failures: 0 }),
    );

    // One failure after that is one, not the third in a row.
    mode = "503";
    expect((await post(gw.url)).res.status).toBe(200);
    expect(a.requests.length).toBe(4);
    expect((await circuitOf(gw.url, "a")).state).toBe("closed");
  });

  it("a client abort of an older request during a trial neither reopens nor keeps it open", async () => {
    let n = 0;
    let oldGone = false;
    let releaseTrial: () => void = () => {};
    const trialHeld = new Promise<void>((r) => {
      releaseTrial = r;
    });
    const a = await scripted((_r, res: ServerResponse) => {
      n++;
      if (n === 1) {
        // The older request: no answer until its client leaves.
        res.on("close", () => {
          oldGone = true;
        });
        return;
      }
      if (n === 2) {
        res.writeHead(503, { "content-type": "application/json" }).end('{"error":"down"}');
        return;
      }
      void trialHeld.then(() => {
        res.writeHead(200, { "content-type": "application/json" }).end(OK_JSON);
      });
    });
    const b = await sim();
    const gw = await gateway({
      workers: [plainEntry("a", a.url), simEntry("b", b)],
      gateway: { breakerFailures: 1, breakerHalfOpenAfterMs: 400, retryBackoffMs: 1 },
    });
    cleanup.push(async () => releaseTrial());
    await pushLoad(gw.url, "b", 30);

    // Sent while a's circuit is closed; a holds it.
    const old = httpRequest(`${gw.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
    });
    old.on("error", () => {});
    old.end(JSON.stringify(BODY));
    await until("a holds the older request", () => a.requests.length === 1);

    // A 503 opens a's circuit (breakerFailures 1); the request is served by b.
    expect((await post(gw.url)).res.status).toBe(200);
    expect(a.requests.length).toBe(2);
    expect((await circuitOf(gw.url, "a")).state).toBe("open");

    await sleep(450);
    const trial = post(gw.url);
    await until("the trial reached a", () => a.requests.length === 3);
    expect((await circuitOf(gw.url, "a")).state).toBe("half_open");

    // The older request's client leaves while the trial runs: says nothing about a.
    old.destroy();
    await until("the older upstream request was cancelled", () => oldGone);
    await sleep(50);
    expect((await circuitOf(gw.url, "a")).state).toBe("half_open");

    releaseTrial();
    const t = await trial;
    expect(t.res.status).toBe(200);
    expect(t.res.headers.get("x-kvrouter-worker")).toBe("a#0");
    expect((await circuitOf(gw.url, "a")).state).toBe("closed");
  });
});

describe("gateway: circuit breaker, an older request failing during the trial", () => {
  it("the trial's success still closes the circuit", async () => {
    let n = 0;
    let answerOld: () => void = () => {};
    let releaseTrial: () => void = () => {};
    const trialHeld = new Promise<void>((r) => {
      releaseTrial = r;
    });
    const a = await scripted((_r, res: ServerResponse) => {
      n++;
      if (n === 1) {
        // The older request, sent while closed: its 503 comes during the trial.
        answerOld = () =>
          res.writeHead(503, { "content-type": "application/json" }).end('{"error":"old"}');
        return;
      }
      if (n === 2) {
        res.writeHead(503, { "content-type": "application/json" }).end('{"error":"down"}');
        return;
      }
      void trialHeld.then(() => {
        res.writeHead(200, { "content-type": "application/json" }).end(OK_JSON);
      });
    });
    const b = await sim();
    const gw = await gateway({
      workers: [plainEntry("a", a.url), simEntry("b", b)],
      gateway: { breakerFailures: 1, breakerHalfOpenAfterMs: 400, retryBackoffMs: 1 },
    });
    cleanup.push(async () => releaseTrial());
    await pushLoad(gw.url, "b", 30);

    const old = post(gw.url);
    await until("a holds the older request", () => a.requests.length === 1);
    expect((await post(gw.url)).res.status).toBe(200);
    expect(a.requests.length).toBe(2);
    expect((await circuitOf(gw.url, "a")).state).toBe("open");

    await sleep(450);
    const trial = post(gw.url);
    await until("the trial reached a", () => a.requests.length === 3);
    expect((await circuitOf(gw.url, "a")).state).toBe("half_open");

    // The older request fails now (retried on b): the trial decides, not it.
    answerOld();
    expect((await old).res.status).toBe(200);
    expect((await circuitOf(gw.url, "a")).state).toBe("half_open");

    releaseTrial();
    const t = await trial;
    expect(t.res.headers.get("x-kvrouter-worker")).toBe("a#0");
    expect((await circuitOf(gw.url, "a")).state).toBe("closed");
  });
});
