/**
 * Sending one request to one worker with undici's pooled `Agent` (keep-alive connections
 * per worker origin, no per-request connection set-up), and waiting until the first body
 * byte: that is the point after which the gateway commits to this worker. Before it, a
 * connect error, a timeout or a 5xx/429 is an `UpstreamFailure` the caller may retry
 * elsewhere; after it, the body is handed over paused, for the relay to stream. Sent with
 * undici's dispatch handler interface, so an answer's chunks reach the relay as callbacks
 * (no promise, Readable stream or AbortController per request).
 */

import { Agent } from "undici";
import { ClientGoneError } from "./errors.js";
import { type UpstreamAnswer, UpstreamCall, type UpstreamTimeouts } from "./upstream-call.js";

export {
  type BodySink,
  type FailureKind,
  REFUSED_CODES,
  type UpstreamAnswer,
  type UpstreamBody,
  UpstreamFailure,
  type UpstreamTimeouts,
} from "./upstream-call.js";

/** A worker URL split once for undici's `dispatch` (no URL parse per request). */
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
   * Sent with undici's handler interface (`dispatch`): the answer's chunks reach the
   * relay as callbacks, with no promise or stream object per answer in between.
   */
  post(
    url: string,
    headers: Record<string, string>,
    body: Buffer,
    timeouts: UpstreamTimeouts,
    signal: AbortSignal,
  ): Promise<UpstreamAnswer> {
    if (signal.aborted) return Promise.reject(new ClientGoneError("client gone"));
    const { origin, path } = this.#target(url);
    return new Promise((resolve, reject) => {
      const call = new UpstreamCall(
        url,
        timeouts.firstByteMs,
        timeouts.idleMs,
        signal,
        resolve,
        reject,
      );
      try {
        this.agent.dispatch(
          {
            origin,
            path,
            method: "POST",
            headers,
            body,
            headersTimeout: timeouts.firstByteMs,
            // Until the first chunk the call's first-byte timer applies, after it its own
            // idle timer: undici's would run from the head on (0: off).
            bodyTimeout: 0,
          },
          call,
        );
      } catch (err) {
        call.onResponseError(null, err as Error);
      }
    });
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
