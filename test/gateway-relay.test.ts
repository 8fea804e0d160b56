/**
 * The relay after the first byte, over real HTTP on loopback: a client that stops reading
 * stops the worker too (backpressure through the gateway, nothing buffered whole), and a
 * worker that goes quiet mid-stream past `gateway.idleTimeoutMs` is cut, leaving nothing
 * in flight.
 */

import { describe, expect, it } from "vitest";
import {
  inFlightTotal,
  metricValue,
  open,
  plainEntry,
  type RunningGateway,
  type ScriptedWorker,
  startGateway,
  startScripted,
  until,
} from "./gateway-harness.js";
import { closersAfterEach } from "./http-harness.js";

const BODY = JSON.stringify({
  model: "sim-model",
  prompt: [11, 12, 13, 14, 15, 16, 17, 18],
  max_tokens: 2,
  stream: true,
  stream_options: { include_usage: true },
});

const cleanup = closersAfterEach();

async function gateway(raw: Record<string, unknown>): Promise<RunningGateway> {
  const gw = await startGateway(raw);
  cleanup.push(() => gw.close());
  return gw;
}
async function scripted(...args: Parameters<typeof startScripted>): Promise<ScriptedWorker> {
  const w = await startScripted(...args);
  cleanup.push(() => w.close());
  return w;
}

/** 64 KB SSE events, as many as fit in `total` bytes. */
const EVENT = Buffer.from(`data: ${"x".repeat(64 * 1024 - 8)}\n\n`);

/**
 * A worker streaming `total` bytes of events as fast as the gateway takes them (waiting
 * for `drain` when its socket is full), then `[DONE]` — or, with `end` false, nothing more
 * with the connection left open. `written()`: bytes handed to its socket so far.
 */
async function pumpingWorker(total: number, end = true) {
  let written = 0;
  const w = await scripted((_r, res) => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    const pump = () => {
      while (written < total) {
        written += EVENT.length;
        if (!res.write(EVENT)) {
          res.once("drain", pump);
          return;
        }
      }
      if (end) res.end("data: [DONE]\n\n");
    };
    pump();
  });
  return { w, written: () => written };
}

const metrics = async (url: string) => (await fetch(`${url}/metrics`)).text();

/** POST the stream request (the test may stop reading its answer). */
const openStream = (url: string) => open(url, "/v1/completions", BODY);

describe("gateway relay", () => {
  it("a client that stops reading stops the worker: nothing is buffered whole", async () => {
    const TOTAL = 64 * 1024 * 1024;
    const { w, written } = await pumpingWorker(TOTAL);
    const gw = await gateway({ workers: [plainEntry("w", w.url)] });
    const res = await openStream(gw.url);
    expect(res.statusCode).toBe(200);
    res.pause();
    // Socket buffers on three hops hold a few MB; the whole answer would be 64 MB.
    await until("the worker to be held back", () => written() > 0);
    await new Promise((r) => setTimeout(r, 500));
    const heldAt = written();
    await new Promise((r) => setTimeout(r, 300));
    expect(written()).toBe(heldAt);
    expect(heldAt).toBeLessThan(TOTAL / 4);
    // Reading again lets the rest through, every byte of it.
    let got = 0;
    res.on("data", (c: Buffer) => {
      got += c.length;
    });
    res.resume();
    await new Promise<void>((resolve) => res.once("end", () => resolve()));
    expect(got).toBe(TOTAL + "data: [DONE]\n\n".length);
    await until("no request in flight", async () => (await inFlightTotal(gw.url)) === 0);
  });

  it("a client that stops reading for longer than idleTimeoutMs, the worker still sending: not cut", async () => {
    // Each resume after a drain hands the relay what the worker's socket holds at once;
    // when that fills the client's socket again, the call is paused inside the resume:
    // no idle timer may run then (the worker is held back, not quiet).
    const TOTAL = 16 * 1024 * 1024;
    const { w } = await pumpingWorker(TOTAL);
    const gw = await gateway({
      workers: [plainEntry("w", w.url)],
      gateway: { idleTimeoutMs: 300 },
    });
    const res = await openStream(gw.url);
    expect(res.statusCode).toBe(200);
    let got = 0;
    let cut = false;
    res.on("data", (c: Buffer) => {
      got += c.length;
    });
    res.on("aborted", () => {
      cut = true;
    });
    res.on("error", () => {
      cut = true;
    });
    const ended = new Promise<void>((resolve) => res.once("close", () => resolve()));
    // Read a few MB (drains and resumes on the way), then stop reading past idleTimeoutMs.
    await until("part of the answer", () => got > 2 * 1024 * 1024);
    res.pause();
    await new Promise((r) => setTimeout(r, 1000));
    res.resume();
    await ended;
    expect(cut).toBe(false);
    expect(got).toBe(TOTAL + "data: [DONE]\n\n".length);
    await until("no request in flight", async () => (await inFlightTotal(gw.url)) === 0);
  });

  it("a client that held the worker back, then reads on, a worker quiet after: cut", async () => {
    const BURST = 8 * 1024 * 1024;
    // …and nothing more after the burst, the connection left open.
    const { w } = await pumpingWorker(BURST, false);
    const gw = await gateway({
      workers: [plainEntry("w", w.url)],
      gateway: { idleTimeoutMs: 300 },
    });
    const res = await openStream(gw.url);
    expect(res.statusCode).toBe(200);
    let got = 0;
    res.on("data", (c: Buffer) => {
      got += c.length;
    });
    res.on("error", () => {});
    const closed = new Promise<void>((resolve) => res.once("close", () => resolve()));
    res.pause();
    await new Promise((r) => setTimeout(r, 1000));
    res.resume();
    await closed;
    expect(got).toBe(BURST);
    expect(res.complete).toBe(false);
    await until("no request in flight", async () => (await inFlightTotal(gw.url)) === 0);
  });

  it("a worker quiet past idleTimeoutMs after its first byte: the stream is cut", async () => {
    const w = await scripted((_r, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write('data: {"choices":[{"text":"a"}]}\n\n');
      // …and nothing more.
    });
    const gw = await gateway({
      workers: [plainEntry("w", w.url)],
      gateway: { idleTimeoutMs: 300 },
    });
    const res = await fetch(`${gw.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: BODY,
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
