/**
 * The admission queue in a fleet serving two models, over real HTTP on loopback: a
 * request waits only when every candidate for its own model is busy, so a request for a
 * model with an idle worker is not held behind one queued for a saturated model.
 */

import { describe, expect, it } from "vitest";
import {
  metricValue,
  plainEntry,
  type ScriptedWorker,
  simEntry,
  startGateway,
  startScripted,
  startSim,
  until,
} from "./gateway-harness.js";
import { closersAfterEach } from "./http-harness.js";

const cleanup = closersAfterEach();

async function scripted(handler: Parameters<typeof startScripted>[0]): Promise<ScriptedWorker> {
  const w = await startScripted(handler);
  cleanup.push(() => w.close());
  return w;
}

const post = (url: string, model: string) =>
  fetch(`${url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, prompt: [1, 2, 3, 4], max_tokens: 1 }),
  }).then(async (r) => ({ status: r.status, text: await r.text() }));

describe("gateway: admission per model", () => {
  it("a request for a model with an idle worker is not held behind one for a busy model", async () => {
    const ok = (_r: unknown, res: import("node:http").ServerResponse) =>
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    const x = await scripted(ok);
    const y = await scripted(ok);
    const gw = await startGateway({
      workers: [plainEntry("x", x.url, { model: "mx" }), plainEntry("y", y.url, { model: "my" })],
      gateway: { busyWaiting: 2, queueSize: 8, queueTimeoutMs: 3000 },
    });
    cleanup.push(() => gw.close());
    const load = await fetch(`${gw.url}/v1/workers/x/load`, {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ running: 0, waiting: 5, kv_usage: 0 }),
    });
    expect(load.status).toBe(200);

    const queued = post(gw.url, "mx");
    await until(
      "the mx request queued",
      async () =>
        metricValue(
          await (await fetch(`${gw.url}/metrics`)).text(),
          "kvrouter_gateway_queue_depth",
        ) === 1,
    );
    const other = await Promise.race([
      post(gw.url, "my"),
      new Promise<"held">((r) => setTimeout(() => r("held"), 1500)),
    ]);
    expect(other).toEqual({ status: 200, text: "{}" });
    expect(y.requests.length).toBe(1);
    expect((await queued).status).toBe(429);
    expect(x.requests.length).toBe(0);
  });
});

describe("gateway: admission for a LoRA adapter", () => {
  it("waits while every worker listing the adapter is busy, though another base worker is idle", async () => {
    const a = await startSim(["--lora", "sql-lora"]);
    cleanup.push(() => a.close());
    const b = await startSim();
    cleanup.push(() => b.close());
    const gw = await startGateway({
      workers: [simEntry("a", a), simEntry("b", b)],
      gateway: { busyWaiting: 2, queueSize: 8, queueTimeoutMs: 1000 },
    });
    cleanup.push(() => gw.close());
    const load = await fetch(`${gw.url}/v1/workers/a/load`, {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ running: 0, waiting: 5, kv_usage: 0 }),
    });
    expect(load.status).toBe(200);
    // a, the one worker listing the adapter, is busy: the request waits, then is refused.
    const lora = await post(gw.url, "sql-lora");
    expect(lora.status, lora.text).toBe(429);
    expect(a.engine.counters().finished).toBe(0);
    // The base model has an idle worker (b): served at once.
    expect((await post(gw.url, "sim-model")).status).toBe(200);
  });
});

describe("gateway: admission across keys that share workers", () => {
  it("a base-model request does not take the freed worker a queued adapter request waits for", async () => {
    // a lists the adapter, b does not; both serve the base model.
    const models = (adapter: boolean) =>
      JSON.stringify({
        object: "list",
        data: [
          { id: "sim-model", object: "model" },
          ...(adapter ? [{ id: "sql-lora", object: "model", parent: "sim-model" }] : []),
        ],
      });
    const worker =
      (adapter: boolean) => (r: { url: string }, res: import("node:http").ServerResponse) => {
        if (r.url.startsWith("/v1/models")) {
          res.writeHead(200, { "content-type": "application/json" }).end(models(adapter));
          return;
        }
        res.writeHead(200, { "content-type": "application/json" }).end("{}");
      };
    const a = await scripted(worker(true));
    const b = await scripted(worker(false));
    const gw = await startGateway({
      workers: [plainEntry("a", a.url), plainEntry("b", b.url)],
      gateway: { busyWaiting: 1, queueSize: 8, queueTimeoutMs: 5000 },
    });
    cleanup.push(() => gw.close());
    const setWaiting = async (id: string, waiting: number) => {
      const r = await fetch(`${gw.url}/v1/workers/${id}/load`, {
        method: "PUT",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ running: 0, waiting, kv_usage: 0 }),
      });
      expect(r.status).toBe(200);
    };
    const completions = () => a.requests.filter((r) => r.method === "POST");
    // The queue re-checks every 25 ms: a base request can land before that check in most
    // rounds, not all, so a few rounds.
    for (let round = 0; round < 4; round++) {
      await setWaiting("a", 5);
      await setWaiting("b", 5);
      // Every worker busy: the adapter's request queues.
      const lora = post(gw.url, "sql-lora");
      await until(
        "the adapter's request queued",
        async () =>
          metricValue(
            await (await fetch(`${gw.url}/metrics`)).text(),
            "kvrouter_gateway_queue_depth",
          ) === 1,
      );
      const before = completions().length;
      // a frees (the queue notices at its next check); a base-model request arrives at once.
      await setWaiting("a", 0);
      const base = post(gw.url, "sim-model");
      expect((await lora).status).toBe(200);
      // The adapter's request, first in line for a, went there first.
      expect(JSON.parse(completions()[before]!.body).model, `round ${round}`).toBe("sql-lora");
      await setWaiting("b", 0);
      expect((await base).status).toBe(200);
    }
  });
});
