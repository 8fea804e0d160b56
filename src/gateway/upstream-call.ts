/**
 * One attempt at a worker, as undici's dispatch handler (`UpstreamClient.post` sends it):
 * what an attempt can end in before the first body byte (`UpstreamFailure`: connect,
 * timeout, 5xx/429 status, classified from undici's error codes), and after it the
 * answer's body (`UpstreamBody`), handed to the relay paused.
 */

import type { Dispatcher } from "undici";
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

/** Where the rest of a worker's answer goes once the gateway has committed to it. */
export interface BodySink {
  data(chunk: Buffer): void;
  end(): void;
  error(err: Error): void;
}

/** The rest of a worker's answer after its first chunk: paused until attached. */
export interface UpstreamBody {
  /** Deliver the rest to `sink`, what arrived meanwhile first (`resume()` to read on). */
  attach(sink: BodySink): void;
  /** Stop reading from the worker (backpressure reaches it through TCP). */
  pause(): void;
  resume(): void;
  /** Abandon the answer: the connection to the worker is closed, the engine aborts. */
  destroy(): void;
}

/** A worker's answer whose first body chunk has arrived; the rest waits, paused. */
export interface UpstreamAnswer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  /** The first body chunk (null: the body was empty). */
  readonly first: Buffer | null;
  /** The rest of the body. */
  readonly body: UpstreamBody;
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

/**
 * One attempt, as undici's dispatch handler: before the first body chunk it settles the
 * attempt's promise (an answer, or a failure to classify); after it, it is the answer's
 * body, pausing the worker's connection until the relay attaches and whenever the
 * client's socket is full.
 */
export class UpstreamCall implements Dispatcher.DispatchHandler, UpstreamBody {
  #controller: Dispatcher.DispatchController | null = null;
  #status = 0;
  #headers: Record<string, string | string[] | undefined> = {};
  /** A 5xx/429 answer: its body is read (bounded) into the failure's message. */
  #errorText: string | null = null;
  #settled = false;
  #timedOut = false;
  readonly #timer: NodeJS.Timeout;
  #sink: BodySink | null = null;
  /** What arrived after the first chunk before the relay attached. */
  #held: Buffer[] = [];
  #end: { error: Error | null } | null = null;
  #destroyed = false;
  /**
   * The idle timeout after the first chunk (undici's own `bodyTimeout` would also run
   * between the head and the first chunk, cutting a prefill at `idleMs`). Armed while
   * the body is read (not while paused, as undici's), refreshed by every chunk.
   */
  #idle: NodeJS.Timeout | null = null;
  /** The body ended or failed after the first chunk (no idle timer from then on). */
  #ended = false;

  constructor(
    readonly url: string,
    readonly firstByteMs: number,
    readonly idleMs: number,
    readonly signal: AbortSignal,
    readonly resolve: (a: UpstreamAnswer) => void,
    readonly reject: (e: Error) => void,
  ) {
    this.#timer = setTimeout(() => {
      this.#timedOut = true;
      this.#controller?.abort(new Error("first byte timeout"));
    }, firstByteMs);
    signal.addEventListener("abort", this.#onClientAbort, { once: true });
  }

  readonly #onClientAbort = () => this.#controller?.abort(new ClientGoneError("client gone"));

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller;
    if (this.signal.aborted || this.#timedOut || this.#destroyed) {
      controller.abort(new ClientGoneError("client gone"));
    }
  }

  onResponseStart(
    _c: Dispatcher.DispatchController,
    status: number,
    headers: Record<string, string | string[] | undefined>,
  ): void {
    this.#status = status;
    this.#headers = headers;
    if (status >= 500 || status === 429) this.#errorText = "";
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.#errorText !== null) {
      if (this.#errorText.length < ERROR_BODY_BYTES) this.#errorText += chunk.toString("utf8");
      return;
    }
    if (!this.#settled) {
      // The gateway commits: the rest waits for the relay.
      controller.pause();
      this.#answer(chunk, false);
      return;
    }
    this.#idle?.refresh();
    if (this.#sink !== null) this.#sink.data(chunk);
    else this.#held.push(chunk);
  }

  onResponseEnd(): void {
    if (this.#errorText !== null) {
      const status = this.#status;
      this.#fail(
        new UpstreamFailure(
          "status",
          `${this.url}: HTTP ${status} ${this.#errorText.slice(0, ERROR_BODY_BYTES)}`.trim(),
          status,
          status !== 429,
        ),
      );
      return;
    }
    if (!this.#settled) {
      this.#answer(null, true);
      return;
    }
    this.#ended = true;
    this.#disarmIdle();
    if (this.#sink !== null) this.#sink.end();
    else this.#end = { error: null };
  }

  onResponseError(_c: Dispatcher.DispatchController | null, err: Error): void {
    if (!this.#settled) {
      this.#fail(this.#classify(err));
      return;
    }
    this.#ended = true;
    this.#disarmIdle();
    if (this.#destroyed) return;
    if (this.#sink !== null) this.#sink.error(err);
    else this.#end = { error: err };
  }

  attach(sink: BodySink): void {
    this.#sink = sink;
    const held = this.#held;
    this.#held = [];
    for (const c of held) sink.data(c);
    const end = this.#end;
    if (end !== null) {
      if (end.error === null) sink.end();
      else sink.error(end.error);
    }
  }

  pause(): void {
    this.#controller?.pause();
    this.#disarmIdle();
  }

  resume(): void {
    // Armed before undici resumes: its resume hands over what the socket holds at once,
    // and a chunk that fills the client's socket again pauses (disarms) inside it, or the
    // body ends (disarms) there.
    if (this.#settled && !this.#destroyed && !this.#ended && this.#idle === null) {
      this.#idle = setTimeout(this.#onIdle, this.idleMs);
    }
    this.#controller?.resume();
  }

  readonly #onIdle = () => {
    this.#idle = null;
    const err = Object.assign(new Error(`${this.url}: no bytes for ${this.idleMs} ms`), {
      code: "UND_ERR_BODY_TIMEOUT",
    });
    this.#controller?.abort(err);
  };

  #disarmIdle(): void {
    if (this.#idle !== null) clearTimeout(this.#idle);
    this.#idle = null;
  }

  destroy(): void {
    if (this.#destroyed) return;
    this.#destroyed = true;
    this.#disarmIdle();
    this.#sink = null;
    this.#controller?.abort(new ClientGoneError("client gone"));
  }

  #answer(first: Buffer | null, ended: boolean): void {
    this.#settled = true;
    this.#cleanup();
    this.resolve({
      status: this.#status,
      headers: this.#headers,
      first,
      body: this,
      ended,
      firstAt: performance.now(),
    });
  }

  #fail(err: Error): void {
    this.#settled = true;
    this.#cleanup();
    this.reject(err);
  }

  #cleanup(): void {
    clearTimeout(this.#timer);
    this.signal.removeEventListener("abort", this.#onClientAbort);
  }

  #classify(err: unknown): Error {
    if (this.signal.aborted) return new ClientGoneError("client gone");
    const code = codeOf(err);
    if (this.#timedOut || TIMEOUT_CODES.has(code)) {
      return new UpstreamFailure(
        "timeout",
        `${this.url}: ${this.#timedOut ? `no first byte within ${this.firstByteMs} ms` : code}`,
        null,
        true,
      );
    }
    if (CONNECT_CODES.has(code) || code === "") {
      const msg = err instanceof Error ? err.message : String(err);
      return new UpstreamFailure("connect", `${this.url}: ${code || msg}`, null, true, code);
    }
    return err instanceof Error ? err : new Error(String(err));
  }
}
