/**
 * `GET /v1/snapshot`: the index snapshot taken now, streamed in the file's format (magic,
 * version, sections, CRC-32: docs/index.md "Warm restart"), for a replica starting warm
 * from a peer (`snapshot.fromPeer`). Behind `server.authToken` when it is set: the body
 * reveals every worker's cached prefixes (as hashes) and stream positions.
 *
 * An export holds the snapshot store's turn (periodic writes and shutdown wait for it),
 * so a client that stops reading must not hold it for long: each download is cut after
 * `SNAPSHOT_EXPORT_DEADLINE_MS`, and downloads still running when the server closes are
 * cut at once.
 */

import { Readable } from "node:stream";
import type { FastifyInstance } from "fastify";
import { requireBearer } from "./auth.js";

/** A whole download must finish within this (31.5 MB at 1M blocks takes < 1 s on a LAN). */
export const SNAPSHOT_EXPORT_DEADLINE_MS = 60_000;

export function registerSnapshotRoutes(
  app: FastifyInstance,
  snapshot: () => AsyncIterable<Uint8Array>,
  authToken: string | null,
  deadlineMs = SNAPSHOT_EXPORT_DEADLINE_MS,
): void {
  const running = new Set<Readable>();
  app.addHook("preClose", (done) => {
    for (const s of running) s.destroy(new Error("server closing"));
    done();
  });
  app.get("/v1/snapshot", { onRequest: requireBearer(authToken) }, async (req, reply) => {
    // Destroying the stream returns the export's generator: its turn is released.
    const body = Readable.from(snapshot(), { objectMode: false });
    running.add(body);
    const timer = setTimeout(() => {
      req.log.warn({ deadlineMs }, "snapshot download cut: not finished within the deadline");
      body.destroy(new Error("snapshot export deadline"));
    }, deadlineMs);
    timer.unref();
    body.once("close", () => {
      clearTimeout(timer);
      running.delete(body);
    });
    reply
      .header("content-type", "application/octet-stream")
      .header("cache-control", "no-store")
      .header("content-disposition", 'attachment; filename="kvrouter-index.snap"');
    return reply.send(body);
  });
}
