/**
 * The floor for `bench:gateway`: the least an HTTP proxy written in Node does — receive
 * the body, forward it with undici's pooled Agent, stream the answer back with
 * backpressure — and nothing else (no parsing, routing, retries or bookkeeping). Run as
 * a child process by the benchmark: `node bench/gateway-floor-proxy.ts <worker url>`;
 * prints `{"port": N}` when listening.
 */

import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Agent, request } from "undici";

const target = process.argv[2];
if (target === undefined) throw new Error("usage: gateway-floor-proxy <worker url>");
const agent = new Agent({ keepAliveTimeout: 4000 });

const server = createServer((req, res) => {
  const parts: Buffer[] = [];
  req.on("data", (c: Buffer) => parts.push(c));
  req.on("end", () => {
    request(`${target}${req.url}`, {
      dispatcher: agent,
      method: "POST",
      headers: { "content-type": "application/json" },
      body: Buffer.concat(parts),
    }).then(
      (up) => {
        res.writeHead(up.statusCode, { "content-type": String(up.headers["content-type"]) });
        up.body.on("data", (c: Buffer) => {
          if (!res.write(c)) {
            up.body.pause();
            res.once("drain", () => up.body.resume());
          }
        });
        up.body.on("end", () => res.end());
        res.on("close", () => up.body.destroy());
      },
      (err: unknown) => {
        res.writeHead(502);
        res.end(String(err));
      },
    );
  });
});
server.listen(0, "127.0.0.1", () => {
  process.stdout.write(`${JSON.stringify({ port: (server.address() as AddressInfo).port })}\n`);
});
process.on("SIGTERM", () => process.exit(0));
