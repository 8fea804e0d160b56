/**
 * The sequencing rules of one engine stream, as a pure state machine: no sockets, no
 * timers, no index. The subscriber feeds it what happened (a live batch, a replayed
 * batch, the end of a replay, a connect) and carries out the actions it returns (apply
 * this batch, replay from N after d ms, reset the worker, the stream is now current or
 * catching up). `test/sequencer-property.test.ts` checks it against a reference model
 * over arbitrary interleavings.
 *
 * The rules (docs/ingestion.md, "The stream rules"):
 * - batches are applied in seq order only; a live batch that skips ahead starts a replay
 *   from the next seq wanted, and live batches queue behind it;
 * - a replay is complete only when its end marker arrives with every seq in between;
 *   a replay that stops early (timeout, socket error, malformed reply) or has a hole is
 *   asked again from the next seq wanted. Retries back off; after `maxAttempts` retries
 *   in a row that brought nothing new, the worker's state is unknown: reset;
 * - when the first batch a replay returns is later than the one asked for, the engine no
 *   longer holds the missing ones: reset, then go on from what it does hold;
 * - a seq going backwards (not a copy of a replayed batch) is an engine restart: reset;
 * - a live copy of a replayed batch is compared with it (a digest of the replayed one is
 *   kept until live passes its seq): other bytes mean the replay endpoint serves another
 *   stream (a misconfiguration): reset, go on live from that batch, and never ask for a
 *   replay again;
 * - after a reconnect, the last applied batch is asked for again and compared with our
 *   copy: different or missing means the engine restarted: reset, replay from 0;
 *   without a replay endpoint nothing can be compared: reset at the reconnect;
 * - the first-contact replay (from 0) is retried on the first successful connection,
 *   however late, until one completes or a live batch takes its place.
 *
 * While a replay is in flight or waiting to be retried the stream is "catching up": the
 * index holds an older, consistent prefix of the engine's stream, and matches against
 * it are flagged as not current.
 *
 * Long file: one state machine; its rules interact (a reconnect during a replay, a
 * restart under a resumed replay) and are read, tested and changed together.
 */

import { Fifo } from "../util/fifo.js";
import { ReplayedCopies } from "./replayed-copies.js";
import type { ResetReason } from "./stream-state.js";

/** A live batch waiting while a replay is in flight. */
interface PendingMessage<P> {
  readonly seq: bigint;
  readonly payload: P;
}

/** What the subscriber must do, in order. */
export type SequencerAction<P> =
  | {
      readonly kind: "apply";
      readonly seq: bigint;
      readonly payload: P;
      readonly replayed: boolean;
    }
  /** Send a replay request for seqs ≥ `from`, `delayMs` from now (0: at once). */
  | { readonly kind: "replay"; readonly from: bigint; readonly delayMs: number }
  /** Drop the worker's entries from the index (and any decoder state). */
  | { readonly kind: "reset"; readonly reason: ResetReason; readonly detail: string }
  /** A batch already applied came again (live after replay, or replayed): dropped. */
  | { readonly kind: "duplicate" }
  /**
   * Live batch `seq` differs from the replayed batch of that seq: the replay endpoint
   * serves another stream. A `reset` follows; no replay is asked for from now on.
   */
  | { readonly kind: "mismatch"; readonly seq: bigint }
  /** The live stream skipped ahead of what was applied. */
  | { readonly kind: "gap"; readonly from: bigint; readonly seen: bigint }
  /** The stream became current (`current: true`) or started catching up. */
  | { readonly kind: "status"; readonly current: boolean };

/** How a replay request ended, as the transport saw it. */
export type ReplayEnd = { readonly status: "complete" } | { readonly status: "failed" };

export interface SequencerOptions<P> {
  /** The first seq of a fresh stream: 0 (vLLM, SGLang) or 1 (Mooncake main). */
  readonly firstSeq: bigint;
  /** The engine has a replay endpoint. Without one, holes reset the worker at once. */
  readonly hasReplay: boolean;
  /** Replays in a row that bring nothing new before giving up. Default 5. */
  readonly maxAttempts?: number;
  /** Back-off before the n-th retry: backoffMs × 2^(n−1), at most backoffMaxMs. */
  readonly backoffMs?: number;
  readonly backoffMaxMs?: number;
  /** Same batch bytes (the reconnect check). */
  readonly same: (a: P, b: P) => boolean;
  /**
   * A digest of a batch's bytes (equal bytes, equal digests; compared with `===`): what is
   * kept of a replayed batch until its live copy comes. Default: the payload itself,
   * compared with `same` (`mapHeld` does not visit those: a caller whose payloads view
   * reused buffers passes a digest).
   */
  readonly digest?: (payload: P) => unknown;
}

export const SEQUENCER_DEFAULTS = { maxAttempts: 5, backoffMs: 200, backoffMaxMs: 5000 } as const;

/** Replayed batches whose digest waits for a live copy, at most (the newest are kept). */
export const REPLAYED_COPIES_KEPT = 16_384;

type Purpose = "contact" | "gap" | "verify";

interface Replay<P> {
  readonly from: bigint;
  readonly purpose: Purpose;
  /** lastSeq when the request was made (progress = it moved). */
  readonly startLast: bigint | null;
  /** Our copy of batch `from` (purpose "verify"). */
  verify: P | null;
  /** No reply seen yet. */
  first: boolean;
  /** Why reading stopped before the end: a hole, or a different stream. */
  stop: "hole" | "restart" | null;
}

export class Sequencer<P> {
  readonly #o: Required<Omit<SequencerOptions<P>, "digest">>;
  /** The replay endpoint is used: false without one, or once it served another stream. */
  #hasReplay: boolean;
  readonly #digest: (payload: P) => unknown;
  readonly #sameDigest: (a: unknown, b: unknown) => boolean;
  /** Digests of batches replays applied since the last live batch applied (not yet matched). */
  readonly #copies = new ReplayedCopies<unknown>(REPLAYED_COPIES_KEPT);
  #last: bigint | null = null;
  #lastPayload: P | null = null;
  readonly #pending = new Fifo<PendingMessage<P>>();
  #replay: Replay<P> | null = null;
  /** Replays in a row without progress. */
  #attempts = 0;
  /** A replay from 0 completed, or a live batch was applied: first contact is done. */
  #contacted = false;
  #sawDisconnect = false;
  /** A reconnect happened during a replay: verify once it is over. */
  #checkPending = false;
  /**
   * Seqs in [dupLow, dupHigh] came by replays since the last live batch applied: their
   * live copies (queued meanwhile) are dropped.
   */
  #dupLow: bigint | null = null;
  #dupHigh: bigint | null = null;
  /** Batches applied since the last reset (or start): is there anything to clear? */
  #appliedSinceReset = 0;
  #current = true;
  /** Resumed from a snapshot and not started yet: `start` verifies the stream. */
  #resumed = false;
  #out: SequencerAction<P>[] = [];

  constructor(options: SequencerOptions<P>) {
    this.#o = {
      ...options,
      maxAttempts: options.maxAttempts ?? SEQUENCER_DEFAULTS.maxAttempts,
      backoffMs: options.backoffMs ?? SEQUENCER_DEFAULTS.backoffMs,
      backoffMaxMs: options.backoffMaxMs ?? SEQUENCER_DEFAULTS.backoffMaxMs,
    };
    this.#hasReplay = options.hasReplay;
    const digest = options.digest;
    this.#digest = digest ?? ((p) => p);
    this.#sameDigest =
      digest !== undefined
        ? (a, b) => a === b
        : (options.same as (a: unknown, b: unknown) => boolean);
  }

  /** Seq of the last batch applied (or skipped past by a reset); null before any. */
  get lastSeq(): bigint | null {
    return this.#last;
  }

  /** The payload of batch `lastSeq` (what a reconnect compares); null before any. */
  get lastPayload(): P | null {
    return this.#lastPayload;
  }

  /**
   * Replaces every payload the sequencer holds past this call (the last batch's, queued
   * live batches, a verify replay's copy) by `f(payload)`; `f` returns the payload itself
   * to keep it. Queued batches are visited newest first, up to the first one kept. The
   * subscriber uses it before handing the decode thread's group buffers back for reuse:
   * the payloads still viewing them (the newest ones) are copied.
   */
  mapHeld(f: (payload: P) => P): void {
    if (this.#lastPayload !== null) this.#lastPayload = f(this.#lastPayload);
    this.#pending.replaceNewest((m) => {
      const payload = f(m.payload);
      return payload === m.payload ? m : { seq: m.seq, payload };
    });
    if (this.#replay?.verify != null) this.#replay.verify = f(this.#replay.verify);
  }

  /**
   * Start from a saved state (a router snapshot): batch `lastSeq`, whose payload was
   * `payload`, is the last one the index holds. Call before `start()`, which then asks
   * the engine for that batch again, as after a reconnect: the same bytes → replay on
   * from `lastSeq + 1`; other bytes, nothing, or a buffer that starts later → reset (the
   * worker is cleared) and go on as a fresh stream. Needs a replay endpoint.
   */
  resume(lastSeq: bigint, payload: P): void {
    if (!this.#hasReplay) throw new Error("resuming a stream needs a replay endpoint");
    if (this.#last !== null || this.#replay !== null) throw new Error("resume before start");
    this.#last = lastSeq;
    this.#lastPayload = payload;
    this.#contacted = true;
    this.#appliedSinceReset = 1; // the index holds this stream's blocks
    this.#resumed = true;
  }

  /** False while a replay is in flight or waiting for its retry. */
  get current(): boolean {
    return this.#current;
  }

  /** True while a replay is in flight (or scheduled). */
  get replaying(): boolean {
    return this.#replay !== null;
  }

  /** False once the replay in flight should stop being read (a hole or another stream). */
  get wantsReplies(): boolean {
    return this.#replay !== null && this.#replay.stop === null;
  }

  /** The subscriber's socket is opening: first contact, replay from 0. */
  start(): SequencerAction<P>[] {
    if (this.#resumed && this.#replay === null) {
      this.#resumed = false;
      this.#beginVerify();
    }
    if (this.#hasReplay && this.#replay === null && !this.#contacted) {
      this.#beginReplay(0n, "contact", 0);
    }
    return this.#flush();
  }

  /** The live socket connected (first time or again). */
  connected(): SequencerAction<P>[] {
    if (!this.#hasReplay) {
      // Nothing can check a reconnect without a replay endpoint: batches published while
      // disconnected are lost, and a restarted engine may be quiet or line up with our
      // seq. What the worker held is no longer known: clear it, go on from the same seq.
      if (this.#sawDisconnect && this.#appliedSinceReset > 0) {
        this.#reset("unfilled_gap", "reconnected without a replay endpoint");
      }
      this.#sawDisconnect = false;
      return this.#flush();
    }
    if (this.#sawDisconnect) {
      if (this.#replay !== null) this.#checkPending = true;
      else if (this.#last !== null && this.#lastPayload !== null) this.#beginVerify();
      else if (!this.#contacted) this.#beginReplay(0n, "contact", 0);
    } else if (!this.#contacted && this.#replay === null && this.#last === null) {
      // The engine came after the router: the first-contact replay is due now.
      this.#beginReplay(0n, "contact", 0);
    }
    return this.#flush();
  }

  disconnected(): SequencerAction<P>[] {
    this.#sawDisconnect = true;
    // Live batches queued from this connection may come from an engine that restarts
    // under the replay in flight: drop them (if the stream is the same, the replay brings
    // them back), and check the stream once that replay is over.
    this.#pending.clear();
    if (this.#replay !== null && this.#hasReplay) this.#checkPending = true;
    return this.#flush();
  }

  /** One live batch, in arrival order. */
  live(seq: bigint, payload: P): SequencerAction<P>[] {
    if (this.#pending.length === 0 && this.#replay === null) {
      if (!this.#step(seq, payload)) this.#pending.push({ seq, payload });
    } else {
      this.#pending.push({ seq, payload });
    }
    return this.#flush();
  }

  /** One batch of the replay in flight, in the order received. */
  replayed(seq: bigint, payload: P): SequencerAction<P>[] {
    const r = this.#replay;
    if (r === null || r.stop !== null) return this.#flush();
    const first = r.first;
    r.first = false;
    if (r.verify !== null && first) {
      const last = this.#last!;
      if (seq > last) {
        // The buffer no longer reaches back to our last batch: whether the engine
        // restarted or only moved on, what came between is lost.
        this.#reset("unfilled_gap", `batch ${last} no longer buffered, replay starts at ${seq}`);
        this.#applyReplayed(seq, payload);
      } else if (seq === last && this.#o.same(r.verify, payload)) {
        this.#out.push({ kind: "duplicate" });
      } else {
        r.stop = "restart"; // other bytes under our last seq: another stream
      }
      return this.#flush();
    }
    const expected = this.#expected();
    if (seq < expected) {
      this.#out.push({ kind: "duplicate" });
    } else if (this.#isNext(seq)) {
      this.#applyReplayed(seq, payload);
    } else if (first) {
      // The engine's buffer starts after what we miss: those batches are gone.
      this.#reset(
        this.#last === null ? "startup_hole" : "unfilled_gap",
        `missing ${expected}..${seq - 1n}, replay buffer starts later`,
      );
      this.#applyReplayed(seq, payload);
    } else {
      r.stop = "hole"; // asked again from the hole once this request is over
    }
    return this.#flush();
  }

  /** The replay in flight is over: end marker (complete), or stopped early (failed). */
  replayEnded(end: ReplayEnd): SequencerAction<P>[] {
    const r = this.#replay;
    if (r === null) return this.#flush();
    this.#replay = null;
    const progress = this.#last !== r.startLast;
    if (progress && this.#last !== null) {
      // What this replay applied: live copies of it, queued meanwhile, are duplicates.
      const from = r.startLast === null ? 0n : r.startLast + 1n;
      if (this.#dupLow === null || from < this.#dupLow) this.#dupLow = from;
      this.#dupHigh = this.#last;
    }
    if (r.stop === "restart" || (end.status === "complete" && r.verify !== null && r.first)) {
      this.#reset("restart", "stream differs after reconnect");
      this.#forget();
      this.#attempts = 0;
      this.#checkPending = false;
      this.#beginReplay(0n, "contact", 0);
      return this.#flush();
    }
    if (r.stop === "hole" || end.status === "failed") {
      this.#attempts = progress ? 0 : this.#attempts + 1;
      if (this.#attempts <= this.#o.maxAttempts) {
        const delay = this.#attempts === 0 ? 0 : this.#backoff(this.#attempts);
        if (r.purpose === "verify" || this.#checkPending) {
          // A reconnect came during this replay: first make sure it is the same stream.
          this.#checkPending = false;
          if (this.#last !== null && this.#lastPayload !== null) this.#beginVerify(delay);
          else this.#beginReplay(this.#expected(), r.purpose, delay);
        } else this.#beginReplay(this.#expected(), r.purpose, delay);
        return this.#flush();
      }
      this.#giveUp(r);
      return this.#flush();
    }
    // Complete: the end marker came and every seq up to it was applied.
    this.#attempts = 0;
    if (r.purpose === "contact") this.#contacted = true;
    if (this.#checkPending && this.#last !== null && this.#lastPayload !== null) {
      // Queued live batches wait: they may come from a restarted engine whose seqs
      // overlap what this replay brought back.
      this.#checkPending = false;
      this.#beginVerify();
      return this.#flush();
    }
    this.#checkPending = false;
    const head = this.#pending.peek();
    if (head !== undefined && head.seq > this.#expected() && !this.#isNext(head.seq) && !progress) {
      // A complete replay that brought nothing up to the queued batch cannot fill it.
      this.#reset(
        this.#last === null ? "startup_hole" : "unfilled_gap",
        `missing ${this.#expected()}..${head.seq - 1n}, replay ended short`,
      );
      this.#last = head.seq - 1n;
    }
    this.#drain();
    return this.#flush();
  }

  /** Attempts are exhausted: what we hold may be stale, so clear it and go on live. */
  #giveUp(r: Replay<P>): void {
    this.#attempts = 0;
    this.#checkPending = false;
    const head = this.#pending.peek();
    if (this.#appliedSinceReset > 0 || r.purpose === "verify" || head !== undefined) {
      this.#reset(
        this.#last === null ? "startup_hole" : "replay_failed",
        `replay from ${r.from} failed ${this.#o.maxAttempts + 1} times in a row`,
      );
    }
    if (r.purpose === "verify") this.#forget();
    if (head !== undefined) {
      this.#last = head.seq - 1n;
      this.#dupLow = this.#dupHigh = null;
      this.#copies.clear();
      this.#drain();
    } else {
      this.#setCurrent(true);
    }
  }

  /** Handle one live batch in order; false when it must wait for a replay just started. */
  #step(seq: bigint, payload: P): boolean {
    if (this.#isNext(seq)) {
      this.#dupLow = this.#dupHigh = null; // FIFO: no replayed copy can follow a newer batch
      this.#copies.clear();
      this.#apply(seq, payload, false);
      this.#contacted = true;
      return true;
    }
    const expected = this.#expected();
    if (seq < expected) {
      if (
        this.#dupLow !== null &&
        this.#dupHigh !== null &&
        seq >= this.#dupLow &&
        seq <= this.#dupHigh
      ) {
        const replayed = this.#copies.take(seq);
        if (replayed !== undefined && !this.#sameDigest(replayed, this.#digest(payload))) {
          this.#mismatch(seq);
          return this.#step(seq, payload); // seq is now next: applied
        }
        this.#out.push({ kind: "duplicate" });
        return true;
      }
      this.#reset("restart", `seq ${seq} after ${this.#last}`);
      this.#forget();
      return this.#step(seq, payload); // expected is now 0 ≤ seq: no further recursion
    }
    if (this.#last !== null) this.#out.push({ kind: "gap", from: expected, seen: seq });
    if (this.#hasReplay) {
      this.#beginReplay(expected, this.#last === null ? "contact" : "gap", 0);
      return false;
    }
    // Nothing applied since the reset at a reconnect: that reset counted this loss.
    if (this.#last === null || this.#appliedSinceReset > 0) {
      this.#reset(
        this.#last === null ? "startup_hole" : "unfilled_gap",
        `missing ${expected}..${seq - 1n}, no replay endpoint`,
      );
    }
    this.#apply(seq, payload, false);
    this.#contacted = true;
    return true;
  }

  /** Apply queued live batches until the queue is empty or a replay starts. */
  #drain(): void {
    while (this.#replay === null) {
      const head = this.#pending.peek();
      if (head === undefined) break;
      if (!this.#step(head.seq, head.payload)) return;
      this.#pending.shift();
    }
    if (this.#replay === null) this.#setCurrent(true);
  }

  #beginVerify(delayMs = 0): void {
    const last = this.#last!;
    this.#startReplay({ from: last, purpose: "verify", verify: this.#lastPayload }, delayMs);
  }

  #beginReplay(from: bigint, purpose: Purpose, delayMs: number): void {
    this.#startReplay({ from, purpose, verify: null }, delayMs);
  }

  #startReplay(r: { from: bigint; purpose: Purpose; verify: P | null }, delayMs: number): void {
    this.#replay = { ...r, startLast: this.#last, first: true, stop: null };
    this.#setCurrent(false);
    this.#out.push({ kind: "replay", from: r.from, delayMs });
  }

  /** Apply a replayed batch and keep its digest for the live copy that may follow. */
  #applyReplayed(seq: bigint, payload: P): void {
    this.#apply(seq, payload, true);
    this.#copies.add(seq, this.#digest(payload));
  }

  /**
   * Live batch `seq` has other bytes than the replayed batch of that seq: the replay
   * endpoint serves another stream (an engine restarted under the same endpoints re-sends
   * its own batches, not these). What the replays applied is not this worker's: clear it,
   * go on live from `seq`, and stop using the replay endpoint, as a stream without one:
   * asking it again (from 0) would bring the other stream back and loop.
   */
  #mismatch(seq: bigint): void {
    this.#out.push({ kind: "mismatch", seq });
    this.#reset("replay_mismatch", `live batch ${seq} differs from the replayed batch ${seq}`);
    this.#hasReplay = false;
    this.#checkPending = false;
    this.#contacted = true;
    this.#dupLow = this.#dupHigh = null;
    this.#copies.clear();
    this.#last = seq - 1n;
    this.#lastPayload = null;
  }

  #apply(seq: bigint, payload: P, replayed: boolean): void {
    this.#last = seq;
    this.#lastPayload = payload;
    this.#appliedSinceReset++;
    this.#out.push({ kind: "apply", seq, payload, replayed });
  }

  #reset(reason: ResetReason, detail: string): void {
    this.#appliedSinceReset = 0;
    this.#out.push({ kind: "reset", reason, detail });
  }

  /** Start over as a fresh stream (after a restart). */
  #forget(): void {
    this.#last = null;
    this.#lastPayload = null;
    this.#dupLow = this.#dupHigh = null;
    this.#copies.clear();
    this.#sawDisconnect = false;
  }

  #setCurrent(current: boolean): void {
    if (this.#current === current) return;
    this.#current = current;
    this.#out.push({ kind: "status", current });
  }

  #backoff(attempt: number): number {
    return Math.min(this.#o.backoffMs * 2 ** (attempt - 1), this.#o.backoffMaxMs);
  }

  #expected(): bigint {
    return this.#last === null ? 0n : this.#last + 1n;
  }

  /** `seq` directly follows what was applied (or opens a fresh stream). */
  #isNext(seq: bigint): boolean {
    return this.#last === null ? seq <= this.#o.firstSeq : seq === this.#last + 1n;
  }

  #flush(): SequencerAction<P>[] {
    const out = this.#out;
    this.#out = [];
    return out;
  }
}
