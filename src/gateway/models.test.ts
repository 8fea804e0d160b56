/**
 * The model catalog against a real worker on loopback HTTP: a worker whose `/v1/models`
 * briefly answers 503 (or 401 to one client's forwarded key) keeps its adapters; a
 * 200 answer that no longer lists one removes it.
 */

import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Agent } from "undici";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ModelCatalog } from "./models.js";

const CARDS = {
  object: "list",
  data: [
    { id: "base", object: "model", parent: null },
    { id: "sql-lora", object: "model", parent: "base" },
  ],
};

let server: Server | null = null;
const agent = new Agent();
afterEach(async () => {
  await new Promise((r) => server?.close(r));
  server = null;
});

/** A worker answering each `/v1/models` with the next of `answers` (the last repeats). */
async function worker(answers: { status: number; body: unknown }[]): Promise<string> {
  let i = 0;
  server = createServer((_req, res) => {
    const a = answers[Math.min(i++, answers.length - 1)]!;
    res.writeHead(a.status, { "content-type": "application/json" });
    res.end(JSON.stringify(a.body));
  });
  await new Promise<void>((r) => server!.listen(0, "127.0.0.1", r));
  return `http://127.0.0.1:${(server!.address() as AddressInfo).port}`;
}

describe("ModelCatalog", () => {
  it("keeps a worker's adapters through a 503 or 401 on /v1/models", async () => {
    const url = await worker([
      { status: 200, body: CARDS },
      { status: 503, body: { error: "loading" } },
      { status: 401, body: { error: "bad key" } },
    ]);
    const c = new ModelCatalog(agent, { ttlMs: 0, refreshUnknownMs: 0 });
    for (let k = 0; k < 4; k++) {
      const t = await c.adapter("sql-lora", [url], null);
      // ttl 0: each lookup also refreshes in the background; let that answer land.
      await new Promise((r) => setTimeout(r, 50));
      expect(t?.parent, `answer ${k}`).toBe("base");
      expect([...(t?.urls ?? [])]).toEqual([url]);
    }
  });

  it("forgets an adapter the worker no longer lists", async () => {
    const url = await worker([
      { status: 200, body: CARDS },
      { status: 200, body: { object: "list", data: [CARDS.data[0]] } },
    ]);
    const c = new ModelCatalog(agent, { ttlMs: 0, refreshUnknownMs: 0 });
    expect((await c.adapter("sql-lora", [url], null))?.parent).toBe("base");
    // ttl 0: a lookup answers from the cards it has and refreshes them in the background.
    await vi.waitFor(async () => expect(await c.adapter("sql-lora", [url], null)).toBeNull());
  });
});
