/**
 * Shared set-up for the HTTP tests: the real service (real index, registry, trackers,
 * router, fastify app) from a config object, with logs captured as JSON records and
 * scraping off (tests push load through the API). Events go straight into the index
 * with `applyEvent`, except in the end-to-end test, which uses real ZeroMQ.
 */

import { Writable } from "node:stream";
import { afterEach } from "vitest";
import { validateConfig } from "../src/config/index.js";
import { computeBlockKeys } from "../src/index/block-key.js";
import { engineHashFromSafeInt } from "../src/protocol/engine-hash.js";
import type { BlockStoredEvent } from "../src/protocol/events.js";
import { createService, type Service } from "../src/service/service.js";
import { createLogger } from "../src/telemetry/logger.js";

export interface TestService extends Service {
  /** Parsed JSON log records written so far. */
  readonly logs: Record<string, unknown>[];
}

/** Build the service from a raw config (validated like a config file). */
export async function startTestService(
  raw: Record<string, unknown> = {},
  options: { nowMs?: () => number } = {},
): Promise<TestService> {
  // No drain on close unless a test asks for one (fetch keeps sockets open between tests).
  const server = { drainMs: 0, ...(raw.server as Record<string, unknown> | undefined) };
  const result = validateConfig({ log: { level: "info" }, ...raw, server });
  if (!result.ok) throw new Error(JSON.stringify(result.issues));
  const logs: Record<string, unknown>[] = [];
  const destination = new Writable({
    write(chunk, _enc, done) {
      for (const line of String(chunk).split("\n")) if (line !== "") logs.push(JSON.parse(line));
      done();
    },
  });
  const logger = createLogger({ level: result.config.log.level, destination });
  let n = 0;
  const service = await createService(result.config, {
    logger,
    scrape: false,
    ...(options.nowMs === undefined ? {} : { nowMs: options.nowMs }),
    rng: () => {
      n = (n * 16807 + 1) % 2147483647;
      return n / 2147483647;
    },
  });
  return Object.assign(service, { logs });
}

/**
 * `startTestService` for one test file: every service it starts is closed after each test
 * (closing is idempotent, so a test may also close its service itself).
 */
export function startsClosedAfterEach(): typeof startTestService {
  const open: TestService[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((s) => s.close()));
  });
  return async (raw, options) => {
    const service = await startTestService(raw, options);
    open.push(service);
    return service;
  };
}

/**
 * Closers for one test file (call once at its top level): each test's are run after it,
 * newest first (a gateway before the workers it forwards to), one at a time.
 */
export function closersAfterEach(): { push(close: () => Promise<void>): void } {
  let closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    const newestFirst = closers.reverse();
    closers = [];
    for (const close of newestFirst) await close();
  });
  return { push: (close) => void closers.push(close) };
}

/** `count` ascending worker declarations `w0..` with push-only load and no events. */
export function workers(count: number, extra: Record<string, unknown> = {}) {
  return Array.from({ length: count }, (_, i) => ({
    id: `w${i}`,
    url: `http://127.0.0.1:${9100 + i}`,
    metricsUrl: null,
    ...extra,
  }));
}

/** A GPU BlockStored event caching `tokens` (full blocks only) from the root. */
export function storedFromRoot(
  tokens: readonly number[],
  blockSize: number,
  hashBase: number,
): BlockStoredEvent {
  const blocks = Math.floor(tokens.length / blockSize);
  return {
    type: "stored",
    blockHashes: Array.from({ length: blocks }, (_, i) => engineHashFromSafeInt(hashBase + i)),
    parentHash: null,
    tokenIds: tokens.slice(0, blocks * blockSize),
    blockSize,
    loraId: null,
    loraName: null,
    medium: null,
    tier: "gpu",
  };
}

/** Token ids 0..n-1 shifted by `offset` (distinct prompts for distinct offsets). */
export function tokens(n: number, offset = 0): number[] {
  return Array.from({ length: n }, (_, i) => i + offset);
}

// biome-ignore lint/suspicious/noExplicitAny: JSON answers are read field by field in tests.
export type Json = Record<string, any>;

/** Listen on loopback (port 0) and return JSON helpers against the real socket. */
export async function listenJson(svc: Service) {
  await svc.app.listen({ host: "127.0.0.1", port: 0 });
  const address = svc.app.server.address();
  if (address === null || typeof address === "string") throw new Error("not listening");
  const base = `http://127.0.0.1:${address.port}`;
  const post = async (path: string, body: unknown) =>
    (await (
      await fetch(`${base}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      })
    ).json()) as Json;
  const get = async (path: string) => (await (await fetch(`${base}${path}`)).json()) as Json;
  return { base, post, get };
}

/** GPU blocks of `prompt` (block size `bs`) that worker `id`'s rank 0 holds in the index. */
export function held(svc: TestService, id: string, prompt: number[], bs: number): number {
  const m = svc.index.findMatches(computeBlockKeys(prompt, bs, null));
  return m.workers.find((w) => w.worker === `${id}#0`)?.gpu ?? 0;
}

/** Worker `id`'s rank-0 event stream as `GET /v1/workers` shows it. */
export async function streamOf(svc: TestService, id: string): Promise<Json> {
  const res = await svc.app.inject({ method: "GET", url: "/v1/workers" });
  return (res.json() as Json).workers.find((w: Json) => w.id === id).ranks[0].stream;
}

/**
 * Worker entries `e0`, `e1`, … for engine publishers (topic "kv", no metrics scrape);
 * their HTTP URLs are never called, on ports from `firstPort`.
 */
export function publisherWorkers(
  pubs: readonly { readonly endpoint: string; readonly replayEndpoint: string | null }[],
  firstPort: number,
) {
  return pubs.map((p, i) => ({
    id: `e${i}`,
    url: `http://127.0.0.1:${firstPort + i}`,
    eventsEndpoint: p.endpoint,
    replayEndpoint: p.replayEndpoint,
    topic: "kv",
    metricsUrl: null,
  }));
}
