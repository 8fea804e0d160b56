/**
 * What a streaming answer keeps alive: once the worker's first byte is relayed, nothing
 * holds the request's parsed body (a chat's messages, a prompt's ids) for the rest of the
 * stream, which may last minutes — otherwise every open stream's body survives each
 * young-generation collection and is copied into the old one. Real HTTP on loopback, a
 * scripted worker that sends one chunk and holds the stream open.
 */

import { request as httpRequest, type IncomingMessage, type ServerResponse } from "node:http";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import { inFlightTotal, plainEntry, startScripted, until } from "./gateway-harness.js";
import { closersAfterEach, startTestService } from "./http-harness.js";

/** `gc()` inside a vitest worker (no --expose-gc flag needed). */
function exposeGc(): () => void {
  setFlagsFromString("--expose-gc");
  return runInNewContext("gc") as () => void;
}

const cleanup = closersAfterEach();

function open(url: string, path: string, body: string): Promise<IncomingMessage> {
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

describe("gateway retention", () => {
  it("a stream past its first byte no longer keeps its parsed body", async () => {
    const gc = exposeGc();
    const held: ServerResponse[] = [];
    const w = await startScripted((_r, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write('data: {"choices":[{"text":"a"}]}\n\n');
      held.push(res); // …and the rest later.
    });
    cleanup.push(() => w.close());
    cleanup.push(async () => {
      for (const res of held) res.destroy();
    });
    const service = await startTestService({ workers: [plainEntry("w", w.url)] });
    cleanup.push(() => service.close());
    // The parsed bodies, as the gateway's parser makes them (whole, or the rest of a
    // token-id body): marked by a field the test adds, watched through weak references.
    const bodies: WeakRef<object>[] = [];
    const texts: string[] = [];
    const parse = JSON.parse;
    JSON.parse = (text: string, reviver?: Parameters<typeof parse>[1]) => {
      const v: unknown = parse(text, reviver);
      if (typeof v === "object" && v !== null && (v as { probe?: unknown }).probe === "retention") {
        bodies.push(new WeakRef(v));
        texts.push(text);
      }
      return v;
    };
    cleanup.push(async () => {
      JSON.parse = parse;
    });
    const url = await service.app.listen({ host: "127.0.0.1", port: 0 });

    const requests = [
      // A token-id prompt (read from the bytes) and one parsed whole.
      [
        "/v1/completions",
        { model: "sim-model", prompt: [1, 2, 3, 4], stream: true, probe: "retention" },
      ],
      [
        "/v1/completions",
        { model: "sim-model", prompt: [[5, 6, 7]], stream: true, probe: "retention" },
      ],
    ] as const;
    const answers: IncomingMessage[] = [];
    for (const [path, body] of requests) {
      const res = await open(url, path, JSON.stringify(body));
      expect(res.statusCode).toBe(200);
      await new Promise<void>((resolve) => res.once("data", () => resolve()));
      answers.push(res);
    }
    expect(bodies).toHaveLength(requests.length);
    // The flat ids were read from the bytes (JSON.parse saw a placeholder), the nested
    // ones parsed whole.
    expect(texts[0]).toContain('"prompt":0');
    expect(texts[1]).toContain('"prompt":[[5,6,7]]');
    // Both streams are open (the worker holds them), their first bytes relayed.
    await until(
      "the bodies to be collected",
      async () => {
        gc();
        await new Promise((r) => setImmediate(r));
        return bodies.every((b) => b.deref() === undefined);
      },
      5000,
    );
    expect(held).toHaveLength(requests.length);
    // The streams still end as they should.
    for (const res of held) res.end("data: [DONE]\n\n");
    for (const res of answers) {
      res.resume();
      await new Promise<void>((resolve) => res.once("end", () => resolve()));
    }
    await until("no request in flight", async () => (await inFlightTotal(url)) === 0);
  });
});
