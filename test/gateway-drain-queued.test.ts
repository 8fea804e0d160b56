/**
 * The shutdown drain with a request held in the admission queue, over real HTTP on
 * loopback: the drain refuses it at once (503 `shutting_down`, `Connection: close`) rather
 * than leaving it queued until its deadline while the server waits for its connection.
 */

import { describe, expect, it } from "vitest";
import {
  metricValue,
  plainEntry,
  type ScriptedWorker,
  startGateway,
  startScripted,
  until,
} from "./gateway-harness.js";
import { closersAfterEach } from "./http-harness.js";

const BODY = { model: "sim-model", prompt: [11, 12, 13, 14], max_tokens: 2 };

const cleanup = closersAfterEach();

async function scripted(handler: Parameters<typeof startScripted>[0]): Promise<ScriptedWorker> {
  const w = await startScripted(handler);
  cleanup.push(() => w.close());
  return w;
}

describe("gateway: shutdown drain with a queued request", () => {
  it("the drain refuses what is queued: 503 shutting_down at once, nothing sent", async () => {
    const w = await scripted((_r, res) => {
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
    const gw = await startGateway({
      workers: [plainEntry("w", w.url)],
      server: { drainMs: 1000 },
      gateway: { busyWaiting: 2, queueSize: 4, queueTimeoutMs: 20_000 },
    });
    cleanup.push(() => gw.close());
    const load = await fetch(`${gw.url}/v1/workers/w/load`, {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ running: 0, waiting: 5, kv_usage: 0 }),
    });
    expect(load.status).toBe(200);
    const queued = fetch(`${gw.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(BODY),
    }).then(async (r) => ({
      status: r.status,
      connection: r.headers.get("connection"),
      body: (await r.json()) as { error: { code: string } },
    }));
    await until(
      "one request queued",
      async () =>
        metricValue(
          await (await fetch(`${gw.url}/metrics`)).text(),
          "kvrouter_gateway_queue_depth",
        ) === 1,
    );
    const closing = gw.close();
    const answer = await Promise.race([
      queued,
      new Promise<"still queued">((r) => setTimeout(() => r("still queued"), 1500)),
    ]);
    expect(answer).toEqual({
      status: 503,
      connection: "close",
      body: { error: expect.objectContaining({ code: "shutting_down" }) },
    });
    await closing;
    expect(w.requests.length).toBe(0);
  }, 15_000);
});
