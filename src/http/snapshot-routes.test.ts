/**
 * `GET /v1/snapshot` on real loopback HTTP: a client that stops reading does not hold the
 * export (and with it the snapshot store's turn) past the deadline, and closing the
 * server cuts a download in progress.
 */

import { get } from "node:http";
import type { AddressInfo } from "node:net";
import Fastify from "fastify";
import { describe, expect, it, vi } from "vitest";
import { registerSnapshotRoutes } from "./snapshot-routes.js";

/** An export far larger than socket buffers; records when its generator is released. */
function endless() {
  const state = { chunks: 0, released: false };
  async function* gen(): AsyncGenerator<Uint8Array> {
    try {
      for (;;) {
        state.chunks++;
        yield new Uint8Array(1 << 16);
        await new Promise((r) => setImmediate(r));
      }
    } finally {
      state.released = true;
    }
  }
  return { state, gen };
}

/** Starts a download, reads its first bytes, then stops reading (the socket stays open). */
async function stalledDownload(url: string): Promise<() => void> {
  return new Promise((resolve, reject) => {
    const req = get(url, (res) => {
      res.once("data", () => {
        res.pause();
        resolve(() => req.destroy());
      });
    });
    req.on("error", () => {});
    req.once("timeout", reject);
  });
}

describe("GET /v1/snapshot", () => {
  it("cuts a download the client stopped reading at the deadline, releasing the export", async () => {
    const app = Fastify();
    const { state, gen } = endless();
    registerSnapshotRoutes(app, gen, null, 300);
    await app.listen({ port: 0, host: "127.0.0.1" });
    const port = (app.server.address() as AddressInfo).port;
    const stop = await stalledDownload(`http://127.0.0.1:${port}/v1/snapshot`);
    try {
      await new Promise((r) => setTimeout(r, 100));
      expect(state.released).toBe(false); // still within the deadline, held by the client
      await vi.waitFor(() => expect(state.released).toBe(true), { timeout: 5000 });
    } finally {
      stop();
      await app.close();
    }
  });

  it("closing the server cuts a download in progress", async () => {
    const app = Fastify({ forceCloseConnections: "idle" });
    const { state, gen } = endless();
    registerSnapshotRoutes(app, gen, null, 600_000);
    await app.listen({ port: 0, host: "127.0.0.1" });
    const port = (app.server.address() as AddressInfo).port;
    const stop = await stalledDownload(`http://127.0.0.1:${port}/v1/snapshot`);
    try {
      await app.close(); // would wait for the stalled download without the preClose cut
      expect(state.released).toBe(true);
    } finally {
      stop();
    }
  });
});
