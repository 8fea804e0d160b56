/**
 * Whether the client of a response is still there, and a call when it goes, for the two
 * places that must know (`relay.ts`; the gateway routes' abort before the first byte).
 *
 * A response's own `close` says so, except for a request pipelined behind another on the
 * same connection: Node gives that response no socket until the one before it has
 * finished (`res.socket` null), and if the connection closes meanwhile the queued
 * response never emits `close` (Node 20, test/gateway-pipelined.test.ts). So a queued
 * response is watched through its request's socket — the connection itself — as well.
 */

import type { ServerResponse } from "node:http";

/** The client's connection is gone (or the response destroyed). A queued response is not gone. */
export function clientGone(res: ServerResponse): boolean {
  if (res.destroyed) return true;
  const socket = res.socket ?? res.req?.socket ?? null;
  return socket === null || socket.destroyed;
}

/** Call `gone` once if the client leaves before the response has finished; returns the unwatch. */
export function watchClient(res: ServerResponse, gone: () => void): () => void {
  let called = false;
  const onClose = () => {
    if (called || res.writableFinished) return;
    called = true;
    gone();
  };
  res.on("close", onClose);
  const connection = res.socket === null ? (res.req?.socket ?? null) : null;
  connection?.on("close", onClose);
  return () => {
    res.off("close", onClose);
    connection?.off("close", onClose);
  };
}
