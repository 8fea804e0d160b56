/**
 * Relaying a worker's answer to the client once the gateway has committed to it: status
 * and headers (hop-by-hop ones dropped, the gateway's own added), then the body chunk by
 * chunk as it arrives, never buffered: when the client's socket is full the worker's
 * stream is paused until it drains (backpressure reaches the engine through TCP). A
 * client that goes away destroys the upstream body at once, which closes the connection
 * to the worker: vLLM (and the simulator) abort the request and free its KV blocks.
 */

import type { ServerResponse } from "node:http";
import { clientGone, watchClient } from "./client-watch.js";
import type { UpstreamAnswer } from "./upstream.js";
import type { UsageScanner } from "./usage-scan.js";

export type RelayEnd =
  | { readonly kind: "complete" }
  | { readonly kind: "client_gone" }
  | { readonly kind: "upstream_error"; readonly error: Error };

/** Headers that belong to one connection, never forwarded (RFC 9110 §7.6.1). */
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
]);

/** The worker's response headers minus hop-by-hop ones, plus `extra`. */
export function responseHeaders(
  upstream: UpstreamAnswer["headers"],
  extra: Readonly<Record<string, string>>,
): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(upstream)) {
    if (v !== undefined && !HOP_BY_HOP.has(k)) out[k] = v;
  }
  return Object.assign(out, extra);
}

/** Rewrites a byte stream on its way (e.g. dropping the usage chunk the client did not ask for). */
export interface ChunkFilter {
  push(chunk: Buffer): Buffer;
  flush(): Buffer;
}

/**
 * Stream `answer` to `res`; resolves when it ended one way or another (never rejects).
 * `scanner` sees the worker's bytes, the client gets them through `filter` if any.
 */
export function relay(
  res: ServerResponse,
  answer: UpstreamAnswer,
  headers: Record<string, string | string[]>,
  scanner: UsageScanner | null,
  filter: ChunkFilter | null = null,
): Promise<RelayEnd> {
  return new Promise((resolve) => {
    const body = answer.body;
    let finished = false;
    let draining = false;
    const finish = (end: RelayEnd) => {
      if (finished) return;
      finished = true;
      unwatch();
      res.off("drain", onDrain);
      resolve(end);
    };
    const onDrain = () => {
      draining = false;
      body.resume();
    };
    const write = (chunk: Buffer) => {
      scanner?.push(chunk);
      const out = filter === null ? chunk : filter.push(chunk);
      if (out.length > 0 && !res.write(out) && !draining) {
        draining = true;
        body.pause();
        res.once("drain", onDrain);
      }
    };
    const onEnd = () => {
      if (finished) return;
      const rest = filter?.flush();
      if (rest !== undefined && rest.length > 0) res.write(rest);
      res.end();
      finish({ kind: "complete" });
    };
    const onError = (error: Error) => {
      if (finished) return;
      // After the first byte nothing is retried: the client sees the stream cut.
      res.destroy(error);
      finish({ kind: "upstream_error", error });
    };
    const onGone = () => {
      if (finished) return;
      body.destroy();
      finish({ kind: "client_gone" });
    };
    const unwatch = watchClient(res, onGone);
    if (clientGone(res)) {
      onGone();
      return;
    }
    res.writeHead(answer.status, headers);
    if (answer.first !== null) write(answer.first);
    if (answer.ended) {
      onEnd();
      return;
    }
    // The chunks that arrived meanwhile come first, then reading resumes (unless the
    // client's socket is already full: the drain resumes it).
    body.attach({
      data: (chunk) => {
        if (!finished) write(chunk);
      },
      end: onEnd,
      error: onError,
    });
    if (!finished && !draining) body.resume();
  });
}
