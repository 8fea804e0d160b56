/**
 * Which scrape deadline fires while garbage collection runs? 20 concurrent fetches of a
 * loopback server that never answers, with gc() forced every 5 ms, per mechanism:
 * - `any`: `AbortSignal.any([AbortSignal.timeout(T), stop.signal])` (the scraper before);
 * - `timeout`: a plain `AbortSignal.timeout(T)`;
 * - `own-timer`: an AbortController aborted by our own `setTimeout` (the scraper now).
 * A fetch counts as "fired" when it rejects within 10 × T.
 *
 *   node --expose-gc --import tsx bench/scrape-deadline-gc.ts
 *
 * Last line: JSON with the count per mechanism.
 */

import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

const T = 200;
const N = 20;
const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) {
  process.stderr.write("run with node --expose-gc --import tsx bench/scrape-deadline-gc.ts\n");
  process.exit(2);
}

const hanging: ServerResponse[] = [];
const server = createServer((_req, res) => void hanging.push(res));
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/metrics`;

type Kind = "any" | "timeout" | "own-timer";

async function trial(kind: Kind): Promise<boolean> {
  const stop = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  let signal: AbortSignal;
  if (kind === "any") signal = AbortSignal.any([AbortSignal.timeout(T), stop.signal]);
  else if (kind === "timeout") signal = AbortSignal.timeout(T);
  else {
    const c = new AbortController();
    timer = setTimeout(() => c.abort(new Error("deadline")), T);
    signal = c.signal;
  }
  let guard: NodeJS.Timeout | undefined;
  const never = new Promise<boolean>((resolve) => {
    guard = setTimeout(() => resolve(false), T * 10);
  });
  const fired = fetch(url, { signal }).then(
    () => false,
    () => true,
  );
  const r = await Promise.race([fired, never]);
  clearTimeout(timer);
  clearTimeout(guard);
  return r;
}

const gcLoop = setInterval(gc, 5);
const fired: Record<Kind, number> = { any: 0, timeout: 0, "own-timer": 0 };
for (const kind of Object.keys(fired) as Kind[]) {
  const rs = await Promise.all(Array.from({ length: N }, () => trial(kind)));
  fired[kind] = rs.filter(Boolean).length;
  console.log(`${kind.padEnd(10)} fired ${fired[kind]} of ${N} within ${10 * T} ms`);
}
clearInterval(gcLoop);
for (const r of hanging) r.destroy();
server.closeAllConnections();
server.close();
console.log(JSON.stringify({ node: process.version, n: N, timeout_ms: T, fired }));
process.exit(0);
