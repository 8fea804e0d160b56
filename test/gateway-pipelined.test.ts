/**
 * Requests pipelined on one keep-alive connection (HTTP/1.1 allows a client to send the
 * next request before the answer to the previous one). Node queues the later answer and
 * gives it no socket until the earlier one has finished; the gateway must neither take
 * that for a client that left (the answer was dropped and the connection hung) nor miss
 * a client that really leaves while its answer waits (the worker kept generating).
 * Both the listener ahead of fastify and fastify's own routes are exercised (the
 * listener hands a chunked body to fastify). Real HTTP on loopback, a scripted worker.
 */

import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  inFlightTotal,
  plainEntry,
  type RunningGateway,
  type ScriptedWorker,
  startGateway,
  startScripted,
  until,
} from "./gateway-harness.js";

/** A raw request line and headers for `body` (content-length, or chunked in one chunk). */
function post(body: string, chunked: boolean): string {
  const head = "POST /v1/completions HTTP/1.1\r\nhost: gw\r\ncontent-type: application/json\r\n";
  return chunked
    ? `${head}transfer-encoding: chunked\r\n\r\n${Buffer.byteLength(body).toString(16)}\r\n${body}\r\n0\r\n\r\n`
    : `${head}content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

/** Connect to the gateway and send `data`; the bytes received so far, as text. */
function pipeline(url: string, data: string): Promise<{ socket: Socket; received: () => string }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    let got = "";
    const socket = connect(Number(port), hostname, () => {
      socket.write(data);
      resolve({ socket, received: () => got });
    });
    socket.on("data", (d: Buffer) => {
      got += d.toString();
    });
    socket.on("error", reject);
  });
}

describe("gateway: pipelined requests on one connection", () => {
  let worker: ScriptedWorker;
  let gw: RunningGateway;
  /** Open streams at the worker, by the `tag` of their request; true once its client left. */
  const streams = new Map<string, { closed: boolean }>();

  beforeAll(async () => {
    worker = await startScripted((r, res) => {
      const body = JSON.parse(r.body) as { tag: string; stream?: boolean; delay_ms?: number };
      if (body.stream === true) {
        // A stream that never ends by itself: only the client leaving closes it.
        const s = { closed: false };
        streams.set(body.tag, s);
        res.on("close", () => {
          s.closed = true;
        });
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.write(`data: {"tag":"${body.tag}"}\n\n`);
        return;
      }
      setTimeout(() => {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(`{"tag":"${body.tag}"}`);
      }, body.delay_ms ?? 0).unref();
    });
    gw = await startGateway({ workers: [plainEntry("w", worker.url)] });
  });
  afterAll(async () => {
    await gw?.close();
    await worker?.close();
  });

  for (const chunked of [false, true]) {
    const via = chunked ? "fastify's routes (chunked)" : "the listener";
    it(`an answer queued behind a slow one is sent, in order (${via})`, async () => {
      const slow = `{"model":"sim-model","prompt":[1,2,3],"tag":"slow","delay_ms":300}`;
      const fast = `{"model":"sim-model","prompt":[4,5,6],"tag":"fast"}`;
      const c = await pipeline(gw.url, post(slow, chunked) + post(fast, chunked));
      await until("both answers", () => c.received().includes('{"tag":"fast"}'));
      const text = c.received();
      expect(text.match(/HTTP\/1\.1 200/g)?.length).toBe(2);
      expect(text.indexOf('{"tag":"slow"}')).toBeLessThan(text.indexOf('{"tag":"fast"}'));
      c.socket.destroy();
      await until("no request in flight", async () => (await inFlightTotal(gw.url)) === 0);
    });

    it(`a client that leaves while its queued stream waits: the worker's stream is closed (${via})`, async () => {
      const tag = `queued-${chunked}`;
      const slow = `{"model":"sim-model","prompt":[1,2,3],"tag":"slow-${chunked}","delay_ms":60000}`;
      const queued = `{"model":"sim-model","prompt":[7,8,9],"tag":"${tag}","stream":true}`;
      const c = await pipeline(gw.url, post(slow, chunked) + post(queued, chunked));
      await until("the queued stream at the worker", () => streams.has(tag));
      // Its first bytes are held by Node behind the slow answer, which never comes.
      c.socket.destroy();
      await until("the worker's stream closed", () => streams.get(tag)!.closed);
      await until("no request in flight", async () => (await inFlightTotal(gw.url)) === 0);
    });
  }
});
