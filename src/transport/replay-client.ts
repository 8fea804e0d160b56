/**
 * The client side of an engine's replay endpoint (wire-formats §1): a DEALER sends
 * `["", start_seq]` and reads back every buffered batch with seq ≥ start, then an end
 * marker. Three reply layouts exist in the field and are told apart by frame count:
 *
 * - new vLLM (≥ 0.26): `["", topic, seq8, payload]`, end `["", "", FF×8, ""]`;
 * - old vLLM / SGLang: `["", seq8, payload]`, end `["", FF×8, ""]`;
 * - Mooncake dev branch: end marker `["", "", FF×8]` (empty seq frame, payload FF×8).
 *
 * One fresh DEALER per request: after a timeout the old request's late replies die
 * with its socket instead of being mistaken for the next reply.
 */

import "./zmq-context.js"; // before any socket: room for > 1,023 sockets
import { Dealer } from "zeromq";
import { decodeSeq, encodeSeq, isEndSeq } from "./seq.js";

/**
 * Why a replay did not deliver up to the end marker:
 * - `timeout`: no reply frame within `replayTimeoutMs` (endpoint absent or silent);
 * - `malformed`: a reply frame of an unknown layout;
 * - `socket`: the replay socket failed.
 */
export type ReplayFailureReason = "timeout" | "malformed" | "socket";

export const REPLAY_FAILURE_REASONS: readonly ReplayFailureReason[] = [
  "timeout",
  "malformed",
  "socket",
];

/** One parsed reply message. */
export type ReplyFrame =
  | { readonly kind: "batch"; readonly seq: bigint; readonly payload: Uint8Array }
  | { readonly kind: "end" }
  | { readonly kind: "malformed"; readonly detail: string };

/** Parse the frames a DEALER receives for one reply message (delimiter included). */
export function parseReplyFrames(frames: readonly Uint8Array[]): ReplyFrame {
  if (frames.length === 0 || frames[0]!.length !== 0) {
    return { kind: "malformed", detail: "reply does not start with an empty delimiter frame" };
  }
  if (frames.length === 4) {
    // New layout: topic, seq, payload.
    const seqFrame = frames[2]!;
    if (isEndSeq(seqFrame)) return { kind: "end" };
    const seq = decodeSeq(seqFrame);
    if (seq === null) return { kind: "malformed", detail: `seq frame of ${seqFrame.length} bytes` };
    return { kind: "batch", seq, payload: frames[3]! };
  }
  if (frames.length === 3) {
    // Old layout: seq, payload. Mooncake dev ends with an empty seq and FF×8 payload.
    const seqFrame = frames[1]!;
    if (isEndSeq(seqFrame)) return { kind: "end" };
    if (seqFrame.length === 0 && isEndSeq(frames[2]!)) return { kind: "end" };
    const seq = decodeSeq(seqFrame);
    if (seq === null) return { kind: "malformed", detail: `seq frame of ${seqFrame.length} bytes` };
    return { kind: "batch", seq, payload: frames[2]! };
  }
  return { kind: "malformed", detail: `reply of ${frames.length} frames` };
}

/** How a replay request ended. `received` counts batch messages handed to `onBatch`. */
export type ReplayOutcome =
  | { readonly status: "complete"; readonly received: number }
  | {
      readonly status: "failed";
      readonly reason: ReplayFailureReason;
      readonly received: number;
      readonly detail: string;
    };

/**
 * Return false from `onBatch` to stop reading (the rest of the reply is discarded with
 * the socket); the outcome is then "complete".
 */
export type ReplayBatchHandler = (seq: bigint, payload: Uint8Array) => boolean | undefined;

export interface ReplayClientOptions {
  readonly endpoint: string;
  /** Longest silence allowed between two reply messages (and for the request to go out). */
  readonly timeoutMs: number;
  /** Reconnect interval of the DEALER, ms (ZeroMQ's default is 100). */
  readonly reconnectIntervalMs?: number;
}

/** Sends replay requests to one endpoint, one at a time. */
export class ReplayClient {
  readonly #options: ReplayClientOptions;
  #socket: Dealer | null = null;
  #closed = false;

  constructor(options: ReplayClientOptions) {
    this.#options = options;
  }

  /**
   * Ask for every buffered batch with seq ≥ `startSeq` and hand each to `onBatch`, in
   * the order received. Never throws; resolves when the end marker arrives, the reply
   * stalls for `timeoutMs`, or `close()` is called.
   */
  async request(startSeq: bigint, onBatch: ReplayBatchHandler): Promise<ReplayOutcome> {
    if (this.#closed) return { status: "failed", reason: "socket", received: 0, detail: "closed" };
    if (this.#socket !== null) {
      return { status: "failed", reason: "socket", received: 0, detail: "request in flight" };
    }
    const socket = new Dealer({
      linger: 0,
      // Queue the request only on a completed connection. Without it, the pipe made
      // before the engine answers is "hiccuped" when the engine restarts on the same
      // port, and closing the socket then could abort the process inside libzmq 4.3.5
      // (`_state == term_ack_sent || _state == term_req_sent2`, pipe.cpp:355): seen in
      // 2 of 6 loaded runs of test/zmq-subscriber.test.ts's restart cases, 0 of 8 with
      // it. An absent engine now fails the send at `sendTimeout`: reported as a timeout.
      immediate: true,
      receiveTimeout: this.#options.timeoutMs,
      sendTimeout: this.#options.timeoutMs,
      receiveHighWaterMark: 0,
      reconnectInterval: this.#options.reconnectIntervalMs ?? 100,
    });
    this.#socket = socket;
    let received = 0;
    try {
      socket.connect(this.#options.endpoint);
      await socket.send([new Uint8Array(0), encodeSeq(startSeq)]);
      for (;;) {
        const frames = await socket.receive();
        const reply = parseReplyFrames(frames);
        switch (reply.kind) {
          case "end":
            return { status: "complete", received };
          case "malformed":
            return { status: "failed", reason: "malformed", received, detail: reply.detail };
          case "batch":
            received++;
            if (onBatch(reply.seq, reply.payload) === false)
              return { status: "complete", received };
            break;
        }
      }
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (this.#closed) return { status: "failed", reason: "socket", received, detail: "closed" };
      if (code === "EAGAIN") {
        return {
          status: "failed",
          reason: "timeout",
          received,
          detail: `no reply within ${this.#options.timeoutMs} ms`,
        };
      }
      return { status: "failed", reason: "socket", received, detail: String(err) };
    } finally {
      this.#socket = null;
      socket.close();
    }
  }

  /** Abort a request in flight (it resolves as failed) and refuse further ones. */
  close(): void {
    this.#closed = true;
    this.#socket?.close();
  }
}
