/**
 * A client that leaves while its request waits out the backoff between two attempts, over
 * real HTTP on loopback: the request ends then (counted aborted, nothing in flight), not
 * when the backoff timer fires, and no further attempt is sent.
 */

import { request as httpRequest } from "node:http";
import { describe, expect, it } from "vitest";
import {
  inFlightTotal,
  metricValue,
  plainEntry,
  type RunningGateway,
  type ScriptedWorker,
  startGateway,
  startScripted,
  until,
} from "./gateway-harness.js";
import { closersAfterEach } from "./http-harness.js";

const BODY = { model: "sim-model", prompt: [11, 12, 13, 14, 15, 16, 17, 18], max_tokens: 2 };

const cleanup = closersAfterEach();

async function scripted(handler: Parameters<typeof startScripted>[0]): Promise<ScriptedWorker> {
  const w = await startScripted(handler);
  cleanup.push(() => w.close());
  return w;
}

describe("gateway: client abort during the retry backoff", () => {
  it("ends the request at once; nothing more is sent", async () => {
    const a = await scripted((_r, res) => {
      res.writeHead(503, { "content-type": "application/json" }).end('{"error":"down"}');
    });
    const b = await scripted((_r, res) => {
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
    // A backoff of seconds (decorrelated jitter from 20 s): the abort lands inside it.
    const gw: RunningGateway = await startGateway({
      workers: [plainEntry("a", a.url), plainEntry("b", b.url)],
      gateway: { retryBackoffMs: 20_000 },
    });
    cleanup.push(() => gw.close());
    const aborted = async () =>
      metricValue(
        await (await fetch(`${gw.url}/metrics`)).text(),
        "kvrouter_gateway_requests_total",
        {
          outcome: "aborted",
        },
      );

    const req = httpRequest(`${gw.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
    });
    req.on("error", () => {});
    req.end(JSON.stringify(BODY));
    await until("one attempt failed", () => a.requests.length + b.requests.length === 1);
    expect(b.requests.length).toBe(0); // a (first by id on a tie) answered 503
    await new Promise((r) => setTimeout(r, 100));
    req.destroy();

    await until("the request ended as aborted", async () => (await aborted()) === 1, 1500);
    expect(await inFlightTotal(gw.url)).toBe(0);
    expect(b.requests.length).toBe(0);
  });
});
