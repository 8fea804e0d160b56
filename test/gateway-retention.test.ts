/**
 * What a streaming answer keeps alive: once the worker's first byte is relayed, nothing
 * holds the request's parsed body (a chat's messages, a prompt's ids) or the client's
 * bytes for the rest of the stream, which may last minutes — otherwise every open
 * stream's body survives each young-generation collection and is copied into the old one.
 * The bytes forwarded to the worker are another matter: undici keeps them with its
 * request until the answer ends (here a copy with `include_usage` spliced in, which this
 * test does not watch; see docs/gateway.md). Real HTTP on loopback, a scripted worker that
 * sends one chunk and holds the stream open.
 */

import type { IncomingMessage, ServerResponse } from "node:http";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import { inFlightTotal, open, plainEntry, startScripted, until } from "./gateway-harness.js";
import { closersAfterEach, startTestService } from "./http-harness.js";

/** `gc()` inside a vitest worker (no --expose-gc flag needed). */
function exposeGc(): () => void {
  setFlagsFromString("--expose-gc");
  return runInNewContext("gc") as () => void;
}

const cleanup = closersAfterEach();

/** Collect, then poll until every watched object is gone (bounded). */
async function collected(gc: () => void, what: string, refs: WeakRef<object>[]) {
  await until(
    what,
    async () => {
      gc();
      await new Promise((r) => setImmediate(r));
      return refs.every((b) => b.deref() === undefined);
    },
    5000,
  );
}

describe("gateway retention", () => {
  it("a stream past its first byte no longer keeps its parsed body, ids or bytes", async () => {
    const gc = exposeGc();
    const held: ServerResponse[] = [];
    const w = await startScripted((r, res) => {
      // No local tokenizer for this model: the chat's prompt is asked of the worker.
      if (r.url === "/tokenize") {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ count: 3, max_model_len: 4096, tokens: [1, 2, 3] }));
        return;
      }
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write('data: {"choices":[{"text":"a"}]}\n\n');
      held.push(res); // …and the rest later.
    });
    cleanup.push(() => w.close());
    const service = await startTestService({ workers: [plainEntry("w", w.url)] });
    cleanup.push(() => service.close());
    // Closers run newest first: the held streams end before the service waits on them.
    cleanup.push(async () => {
      for (const res of held) res.destroy();
    });
    // The parsed bodies, as the gateway's parser makes them (whole, or the rest of a
    // token-id body): marked by a field the test adds, watched through weak references;
    // with them the token-id prompt's Int32Array, and the client's bytes as fastify's
    // parser or the gateway's own listener (`gateway-front.ts`) gathers them (the
    // forwarded copy is made elsewhere, in stream-usage.ts).
    const bodies: WeakRef<object>[] = [];
    const texts: string[] = [];
    const ids: WeakRef<object>[] = [];
    const bytes: WeakRef<object>[] = [];
    const concat = Buffer.concat;
    Buffer.concat = ((list: readonly Uint8Array[], n?: number) => {
      const b = concat(list, n);
      if (
        b.includes('"probe":"retention"') &&
        // The caller's frame (0: "Error", 1: this wrapper), not the whole stack: the
        // listener's stack also leads to stream-usage.ts's copy.
        /content-type-parser|gateway-front/.test((new Error().stack ?? "").split("\n")[2] ?? "")
      ) {
        bytes.push(new WeakRef(b));
      }
      return b;
    }) as typeof Buffer.concat;
    cleanup.push(async () => {
      Buffer.concat = concat;
    });
    const parse = JSON.parse;
    JSON.parse = (text: string, reviver?: Parameters<typeof parse>[1]) => {
      const v: unknown = parse(text, reviver);
      if (typeof v === "object" && v !== null && (v as { probe?: unknown }).probe === "retention") {
        bodies.push(new WeakRef(v));
        texts.push(text);
        // The token-id reader puts the ids in after JSON.parse returns.
        queueMicrotask(() => {
          const p = (v as { prompt?: unknown }).prompt;
          if (p instanceof Int32Array) ids.push(new WeakRef(p));
        });
      }
      return v;
    };
    cleanup.push(async () => {
      JSON.parse = parse;
    });
    const url = await service.app.listen({ host: "127.0.0.1", port: 0 });

    const requests = [
      // A token-id prompt (read from the bytes), one parsed whole, and a chat.
      [
        "/v1/completions",
        { model: "sim-model", prompt: [1, 2, 3, 4], stream: true, probe: "retention" },
      ],
      [
        "/v1/completions",
        { model: "sim-model", prompt: [[5, 6, 7]], stream: true, probe: "retention" },
      ],
      [
        "/v1/chat/completions",
        {
          model: "sim-model",
          messages: [{ role: "user", content: "hi" }],
          stream: true,
          probe: "retention",
        },
      ],
    ] as const;
    const answers: IncomingMessage[] = [];
    for (const [path, body] of requests) {
      const res = await open(url, path, JSON.stringify(body));
      expect(res.statusCode).toBe(200);
      await new Promise<void>((resolve) => res.once("data", () => resolve()));
      answers.push(res);
    }
    // The flat ids were read from the bytes (JSON.parse saw a placeholder), the nested
    // ones parsed whole; the chat's body is parsed on the event loop too.
    expect(texts[0]).toContain('"prompt":0');
    expect(texts[1]).toContain('"prompt":[[5,6,7]]');
    expect(bodies.length).toBeGreaterThanOrEqual(requests.length);
    expect(ids).toHaveLength(1);
    expect(bytes).toHaveLength(requests.length);
    // Every stream is open (the worker holds it), its first byte relayed.
    expect(held).toHaveLength(requests.length);
    await collected(gc, "the bodies to be collected", bodies);
    await collected(gc, "the ids to be collected", ids);
    await collected(gc, "the client's bytes to be collected", bytes);
    // The streams still end as they should.
    for (const res of held) res.end("data: [DONE]\n\n");
    for (const res of answers) {
      res.resume();
      await new Promise<void>((resolve) => res.once("end", () => resolve()));
    }
    await until("no request in flight", async () => (await inFlightTotal(url)) === 0);
  });
});
