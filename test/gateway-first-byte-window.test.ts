/**
 * The two timeouts of an attempt, over real HTTP on loopback: a worker that sends its
 * response head at once and its first body byte later (uvicorn writes the head of a
 * streaming answer before the engine yields; a long prefill comes in between) has
 * `firstByteTimeoutMs` for that byte, not `idleTimeoutMs`, which only applies between
 * chunks after the first.
 */

import { describe, expect, it } from "vitest";
import {
  inFlightTotal,
  plainEntry,
  type RunningGateway,
  type ScriptedWorker,
  startGateway,
  startScripted,
} from "./gateway-harness.js";
import { closersAfterEach } from "./http-harness.js";

const BODY = { model: "sim-model", prompt: [11, 12, 13, 14], max_tokens: 2, stream: true };
const CHUNK = 'data: {"choices":[{"text":"a"}]}\n\n';

const cleanup = closersAfterEach();

async function scripted(handler: Parameters<typeof startScripted>[0]): Promise<ScriptedWorker> {
  const w = await startScripted(handler);
  cleanup.push(() => w.close());
  return w;
}

describe("gateway: the first byte's window", () => {
  it("a head sent at once, the first byte after idleTimeoutMs but within firstByteTimeoutMs: served", async () => {
    const w = await scripted((_r, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.flushHeaders();
      // The prefill: longer than idleTimeoutMs, shorter than firstByteTimeoutMs.
      setTimeout(() => {
        res.write(CHUNK);
        res.end("data: [DONE]\n\n");
      }, 2500);
    });
    const gw: RunningGateway = await startGateway({
      workers: [plainEntry("w", w.url)],
      gateway: { idleTimeoutMs: 1000, firstByteTimeoutMs: 8000, maxAttempts: 1 },
    });
    cleanup.push(() => gw.close());
    const res = await fetch(`${gw.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(BODY),
    });
    const text = await res.text();
    expect(res.status, text).toBe(200);
    expect(text).toBe(`${CHUNK}data: [DONE]\n\n`);
    expect(w.requests.length).toBe(1);
    expect(await inFlightTotal(gw.url)).toBe(0);
  });
});
