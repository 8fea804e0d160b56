/**
 * Sending one request to one worker with undici's pooled `Agent` (keep-alive connections
 * per worker origin, no per-request connection set-up), and waiting until the first body
 * byte: that is the point after which the gateway commits to this worker. Before it, a
 * connect error, a timeout or a 5xx/429 is an `UpstreamFailure` the caller may retry
 * elsewhere; after it, the body is handed over paused, for the relay to stream.
 */

import { Agent, type Dispatcher } from "undici";
import type { BreakerFailure } from "./breakers.js";
import { ClientGoneError } from "./errors.js";

export type FailureKind = "connect" | "timeout" | "status";

/** A failed attempt before the first byte. */
export class UpstreamFailure extends Error implements BreakerFailure {
  override readonly name = "UpstreamFailure";

  constructor(
    readonly kind: FailureKind,
    message: string,
    /** The worker's HTTP status for `status` failures. */
    readonly status: number | null,
    /** 429 means busy, not broken: retried, but not counted against the circuit. */
    readonly countsForBreaker: boolean,
    /** The socket error code of a `connect` failure ("" otherwise). */
    readonly code = "",
  ) {
    super(message);
  }
}

export interface UpstreamTimeouts {
  readonly firstByteMs: number;
  readonly idleMs: number;
}

/** A worker's answer whose first body chunk has arrived; the rest waits, paused. */
export interface UpstreamAnswer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  /** The first body chunk (null: the body was empty). */
  readonly first: Buffer | null;
  /** The rest of the body, paused; iterate or `on("data")` it. */
  readonly body: NodeJS.ReadableStream & { destroy(err?: Error): void; resume(): unknown };
  /** Whether the body already ended (everything was in `first`). */
  readonly ended: boolean;
  /** `performance.now()` when the first chunk (or the end) arrived. */
  readonly firstAt: number;
}

const CONNECT_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EPIPE",
  "UND_ERR_SOCKET",
  "UND_ERR_CLOSED",
]);
/** Connect errors that say nothing listens there (not a reset keep-alive socket). */
export const REFUSED_CODES: ReadonlySet<string> = new Set([
  "ECONNREFUSED",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
]);
const TIMEOUT_CODES = new Set([
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
  "ETIMEDOUT",
]);

function codeOf(err: unknown): string {
  const e = err as { code?: unknown; cause?: { code?: unknown } } | null;
  const code = e?.code ?? e?.cause?.code;
  return typeof code === "string" ? code : "";
}

/** Longest error body read from a failing worker, for the message. */
const ERROR_BODY_BYTES = 2048;

/** A worker URL split once for undici's `dispatcher.request` (no URL parse per request). */
interface Target {
  readonly origin: string;
  readonly path: string;
}

/** Most distinct URLs kept parsed (workers × two routes); past it the cache starts over. */
const TARGET_CACHE_LIMIT = 4096;

export class UpstreamClient {
  readonly agent: Agent;
  readonly #targets = new Map<string, Target>();

  constructor(opts: { readonly connectTimeoutMs: number }) {
    // keepAliveTimeout stays below uvicorn's 5 s default, so the gateway never reuses a
    // socket the engine is closing (that would be a spurious connect error).
    this.agent = new Agent({
      connect: { timeout: opts.connectTimeoutMs },
      keepAliveTimeout: 4000,
      keepAliveMaxTimeout: 600_000,
      pipelining: 1,
    });
  }

  /**
   * POST `body` to `url`; resolves when the first body byte (or an empty body's end) has
   * arrived with a status below 500 other than 429. `signal` is the client's: when it
   * aborts, the attempt ends with `ClientGoneError` and the upstream request is cancelled.
   */
  async post(
    url: string,
    headers: Record<string, string>,
    body: Buffer,
    timeouts: UpstreamTimeouts,
    signal: AbortSignal,
  ): Promise<UpstreamAnswer> {
    if (signal.aborted) throw new ClientGoneError("client gone");
    const ac = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      ac.abort();
    }, timeouts.firstByteMs);
    const onClientAbort = () => ac.abort();
    signal.addEventListener("abort", onClientAbort, { once: true });
    const cleanup = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", onClientAbort);
    };
    const classify = (err: unknown): Error => {
      if (signal.aborted) return new ClientGoneError("client gone");
      const code = codeOf(err);
      if (timedOut || TIMEOUT_CODES.has(code)) {
        return new UpstreamFailure(
          "timeout",
          `${url}: ${timedOut ? `no first byte within ${timeouts.firstByteMs} ms` : code}`,
          null,
          true,
        );
      }
      if (CONNECT_CODES.has(code) || code === "") {
        const msg = err instanceof Error ? err.message : String(err);
        return new UpstreamFailure("connect", `${url}: ${code || msg}`, null, true, code);
      }
      return err instanceof Error ? err : new Error(String(err));
    };
    let res: Dispatcher.ResponseData;
    try {
      const { origin, path } = this.#target(url);
      res = await this.agent.request({
        origin,
        path,
        method: "POST",
        headers,
        body,
        signal: ac.signal,
        headersTimeout: timeouts.firstByteMs,
        bodyTimeout: timeouts.idleMs,
      });
    } catch (err) {
      cleanup();
      throw classify(err);
    }
    const status = res.statusCode;
    if (status >= 500 || status === 429) {
      let text = "";
      try {
        for await (const chunk of res.body) {
          if (text.length < ERROR_BODY_BYTES) text += String(chunk);
        }
      } catch {
        // the status says enough
      }
      cleanup();
      throw new UpstreamFailure(
        "status",
        `${url}: HTTP ${status} ${text.slice(0, ERROR_BODY_BYTES)}`.trim(),
        status,
        status !== 429,
      );
    }
    try {
      const { first, ended } = await firstChunk(res.body);
      const firstAt = performance.now();
      cleanup();
      return { status, headers: res.headers, first, body: res.body, ended, firstAt };
    } catch (err) {
      cleanup();
      res.body.destroy();
      throw classify(err);
    }
  }

  close(): Promise<void> {
    return this.agent.close();
  }

  #target(url: string): Target {
    let t = this.#targets.get(url);
    if (t === undefined) {
      const u = new URL(url);
      t = { origin: u.origin, path: `${u.pathname}${u.search}` };
      if (this.#targets.size >= TARGET_CACHE_LIMIT) this.#targets.clear();
      this.#targets.set(url, t);
    }
    return t;
  }
}

/** Wait for the first chunk (then pause) or the end of the stream. */
function firstChunk(
  body: NodeJS.ReadableStream,
): Promise<{ first: Buffer | null; ended: boolean }> {
  return new Promise((resolve, reject) => {
    const onData = (c: Buffer) => {
      done();
      body.pause();
      // Until the relay listens, an error (e.g. an abort) must not crash the process.
      body.on("error", () => {});
      resolve({ first: c, ended: false });
    };
    const onEnd = () => {
      done();
      resolve({ first: null, ended: true });
    };
    const onError = (err: Error) => {
      done();
      reject(err);
    };
    const done = () => {
      body.off("data", onData);
      body.off("end", onEnd);
      body.off("error", onError);
    };
    body.on("data", onData);
    body.on("end", onEnd);
    body.on("error", onError);
  });
}
