/**
 * Shared set-up for the gateway tests: the real service listening on loopback (port 0),
 * simulated vLLM workers in process (`startSimWorker`, real HTTP and ZeroMQ), and small
 * scripted HTTP workers for what a simulator does not do on purpose (503s, fixed bytes,
 * recording the headers it received).
 */

import {
  createServer,
  request as httpRequest,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http";
import type { AddressInfo } from "node:net";
import { parseSimArgs } from "../src/sim/sim-config.js";
import { type SimWorkerHandle, startSimWorker } from "../src/sim/sim-worker.js";
import { startTestService, type TestService } from "./http-harness.js";

export interface RunningGateway {
  readonly service: TestService;
  readonly url: string;
  close(): Promise<void>;
}

/** The service with gateway mode on, listening on 127.0.0.1:0. */
export async function startGateway(raw: Record<string, unknown>): Promise<RunningGateway> {
  const service = await startTestService(raw);
  const url = await service.app.listen({ host: "127.0.0.1", port: 0 });
  return { service, url, close: () => service.close() };
}

/** A fast simulated worker (ports chosen by the OS); `extra` flags override. */
export function startSim(extra: string[] = []): Promise<SimWorkerHandle> {
  const c = parseSimArgs([
    ...["--port", "0", "--events-port", "0", "--replay-port", "0"],
    ...["--num-gpu-blocks", "512", "--block-size", "16", "--model", "sim-model"],
    ...["--prefill-tokens-per-s", "2000000", "--prefill-overhead-ms", "1"],
    ...["--decode-ms-per-token", "1", "--seed", "7"],
    ...extra,
  ]);
  if (c === "help") throw new Error("unreachable");
  return startSimWorker(c);
}

/** The config entry for a simulated worker, with its events. */
export function simEntry(id: string, w: SimWorkerHandle, extra: Record<string, unknown> = {}) {
  return {
    id,
    url: w.url,
    eventsEndpoint: w.eventsEndpoint,
    replayEndpoint: w.replayEndpoint,
    metricsUrl: null,
    model: "sim-model",
    ...extra,
  };
}

export interface Recorded {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingMessage["headers"];
  readonly body: string;
}

export interface ScriptedWorker {
  readonly url: string;
  readonly port: number;
  readonly requests: Recorded[];
  close(): Promise<void>;
}

/** An HTTP worker answering with `handler`, recording every request it received. */
export async function startScripted(
  handler: (req: Recorded, res: ServerResponse) => void,
  port = 0,
): Promise<ScriptedWorker> {
  const requests: Recorded[] = [];
  const server: Server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on("data", (c: Buffer) => parts.push(c));
    req.on("end", () => {
      const r = {
        method: req.method ?? "",
        url: req.url ?? "",
        headers: req.headers,
        body: Buffer.concat(parts).toString("utf8"),
      };
      requests.push(r);
      handler(r, res);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => resolve());
  });
  const p = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${p}`,
    port: p,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * POST a JSON body with node's client and resolve with the response once its head has
 * arrived (the test then reads it, or stops reading, as it likes).
 */
export function open(url: string, path: string, body: string): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
    });
    req.once("response", resolve);
    req.once("error", reject);
    req.end(body);
  });
}

/** A port nothing listens on (bound, then released). */
export async function refusedPort(): Promise<number> {
  const w = await startScripted((_r, res) => res.end());
  await w.close();
  return w.port;
}

/** A push-only worker entry (no events, no scraping). */
export function plainEntry(id: string, url: string, extra: Record<string, unknown> = {}) {
  return { id, url, metricsUrl: null, model: "sim-model", ...extra };
}

/** Poll until `probe` holds (bounded; not a timing assertion). */
export async function until(what: string, probe: () => boolean | Promise<boolean>, ms = 10_000) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await probe()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** Read a metric sample's value from the Prometheus text (0 when absent). */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}) {
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (rest[0] !== "{" && rest[0] !== " ") continue;
    const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
    if (want.every((w) => rest.includes(w))) return Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return 0;
}

/** Requests in flight per the router, summed over every worker and rank. */
export async function inFlightTotal(gatewayUrl: string): Promise<number> {
  const res = await fetch(`${gatewayUrl}/v1/workers`);
  const body = (await res.json()) as {
    workers: { ranks: { in_flight: { requests: number } }[] }[];
  };
  let n = 0;
  for (const w of body.workers) for (const r of w.ranks) n += r.in_flight.requests;
  return n;
}

/**
 * Make worker `id` look loaded (`waiting` requests queued) through
 * `PUT /v1/workers/:id/load`, so an idle worker is preferred over it.
 */
export async function pushLoad(url: string, id: string, waiting: number): Promise<void> {
  const res = await fetch(`${url}/v1/workers/${id}/load`, {
    method: "PUT",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ running: 0, waiting, kv_usage: 0 }),
  });
  if (res.status !== 200) throw new Error(`PUT load of ${id}: HTTP ${res.status}`);
}

/** Worker `id`'s circuit breaker as `GET /v1/workers` shows it. */
export async function circuitOf(
  url: string,
  id: string,
): Promise<{ state: string; consecutive_failures: number }> {
  const body = (await (await fetch(`${url}/v1/workers`)).json()) as {
    workers: { id: string; circuit: { state: string; consecutive_failures: number } }[];
  };
  return body.workers.find((w) => w.id === id)!.circuit;
}
