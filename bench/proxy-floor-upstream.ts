/**
 * The upstream for `bench:proxy-floor`: an HTTP server that reads the request body, then
 * answers at once with one server-sent event and ends the stream a millisecond later —
 * an engine whose first token costs nothing, so a path's time to first byte is the
 * transport's and the proxy's. Run as a child process:
 * `node --import tsx bench/proxy-floor-upstream.ts`; prints `{"port": N}` when listening.
 */

import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

const server = createServer((req, res) => {
  req.on("data", () => {});
  req.on("end", () => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.write('data: {"choices":[{"text":"a"}]}\n\n');
    setTimeout(() => res.end("data: [DONE]\n\n"), 1);
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, "127.0.0.1", () => {
  process.stdout.write(`${JSON.stringify({ port: (server.address() as AddressInfo).port })}\n`);
});
process.on("SIGTERM", () => process.exit(0));
