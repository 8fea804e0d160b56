/**
 * `GET /v1/snapshot`: the index snapshot taken now, streamed in the file's format (magic,
 * version, sections, CRC-32: docs/index.md "Warm restart"), for a replica starting warm
 * from a peer (`snapshot.fromPeer`). Behind `server.authToken` when it is set: the body
 * reveals every worker's cached prefixes (as hashes) and stream positions.
 */

import { Readable } from "node:stream";
import type { FastifyInstance } from "fastify";
import { requireBearer } from "./auth.js";

export function registerSnapshotRoutes(
  app: FastifyInstance,
  snapshot: () => AsyncIterable<Uint8Array>,
  authToken: string | null,
): void {
  app.get("/v1/snapshot", { onRequest: requireBearer(authToken) }, async (_req, reply) => {
    reply
      .header("content-type", "application/octet-stream")
      .header("cache-control", "no-store")
      .header("content-disposition", 'attachment; filename="kvrouter-index.snap"');
    return reply.send(Readable.from(snapshot(), { objectMode: false }));
  });
}
