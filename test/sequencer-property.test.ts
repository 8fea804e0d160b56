/**
 * Property test of the pure `Sequencer` against a reference model of an engine: random
 * interleavings of published batches (delivered live or lost on the wire), replay
 * replies (delivered, lost inside the reply = a hole, stalled = a timeout, cut), engine
 * restarts (seq back to 0, buffer emptied), reconnects and a small replay buffer.
 *
 * Checked after every step:
 * - what the index holds comes from one contiguous run of batches of one engine
 *   incarnation since the last reset: a batch is never applied unless every batch before
 *   it (since the reset) was applied, and never twice;
 * - a replay that stopped early (timeout, hole) is never taken as complete: the stream
 *   stays "catching up" (a retry follows) unless it reset the worker;
 * - at most one replay is in flight.
 * And at the end, once the network is healthy again and one more batch is published:
 * the stream is current and holds exactly the engine's latest batch.
 */

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Sequencer, type SequencerAction } from "../src/ingest/sequencer.js";

type Payload = string; // `${incarnation}:${seq}`

type Command =
  | { kind: "publish"; lost: boolean }
  | { kind: "deliver"; n: number }
  | { kind: "reply"; n: number }
  | { kind: "replyHole" }
  | { kind: "replyEnd" }
  | { kind: "replyCut" }
  | { kind: "restart" }
  | { kind: "reconnect" };

const command: fc.Arbitrary<Command> = fc.oneof(
  { arbitrary: fc.boolean().map((lost) => ({ kind: "publish" as const, lost })), weight: 6 },
  {
    arbitrary: fc.integer({ min: 1, max: 4 }).map((n) => ({ kind: "deliver" as const, n })),
    weight: 4,
  },
  {
    arbitrary: fc.integer({ min: 1, max: 4 }).map((n) => ({ kind: "reply" as const, n })),
    weight: 4,
  },
  { arbitrary: fc.constant({ kind: "replyHole" as const }), weight: 1 },
  { arbitrary: fc.constant({ kind: "replyEnd" as const }), weight: 2 },
  { arbitrary: fc.constant({ kind: "replyCut" as const }), weight: 1 },
  { arbitrary: fc.constant({ kind: "restart" as const }), weight: 1 },
  { arbitrary: fc.constant({ kind: "reconnect" as const }), weight: 1 },
);

type Transit =
  | { kind: "live"; seq: bigint; p: Payload }
  | { kind: "connect" }
  | { kind: "disconnect" };

class World {
  incarnation = 0;
  next = 0n;
  buffer: { seq: bigint; p: Payload }[] = [];
  transit: Transit[] = [];
  /** The replay in flight: the replies still to come. */
  replay: { seq: bigint; p: Payload }[] | null = null;
  /** Replies of the replay in flight delivered so far. */
  replied = 0;
  restarts = 0;
  restartResets = 0;
  /** `replay_mismatch` resets: never, the replay endpoint is always the live engine's. */
  mismatchResets = 0;
  /** Batches applied since the last reset, as payloads. */
  run: Payload[] = [];
  readonly seq: Sequencer<Payload>;

  constructor(
    readonly bufferSize: number,
    maxAttempts: number,
  ) {
    this.seq = new Sequencer<Payload>({
      firstSeq: 0n,
      hasReplay: true,
      maxAttempts,
      same: (a, b) => a === b,
    });
  }

  publish(lost: boolean): void {
    const seq = this.next++;
    const p = `${this.incarnation}:${seq}`;
    this.buffer.push({ seq, p });
    if (this.buffer.length > this.bufferSize) this.buffer.shift();
    if (!lost) this.transit.push({ kind: "live", seq, p });
  }

  handle(actions: readonly SequencerAction<Payload>[], after: "end-short" | "other"): void {
    let replayed = false;
    let reset = false;
    for (const a of actions) {
      switch (a.kind) {
        case "apply": {
          if (this.run.length > 0) {
            const [inc, s] = this.run.at(-1)!.split(":");
            expect(a.payload).toBe(`${inc}:${BigInt(s!) + 1n}`); // contiguous, same engine
          }
          this.run.push(a.payload);
          break;
        }
        case "reset":
          if (a.reason === "restart") this.restartResets++;
          if (a.reason === "replay_mismatch") this.mismatchResets++;
          this.run = [];
          reset = true;
          break;
        case "replay":
          expect(this.replay).toBeNull(); // one at a time
          expect(a.delayMs).toBeGreaterThanOrEqual(0);
          this.replay = this.buffer.filter((b) => b.seq >= a.from);
          this.replied = 0;
          replayed = true;
          break;
        default:
          break;
      }
    }
    if (after === "end-short") {
      // A replay that stopped early: retried, or the worker was cleared.
      expect(replayed || reset || this.run.length === 0).toBe(true);
      if (!replayed) expect(this.seq.current).toBe(true);
      else expect(this.seq.current).toBe(false);
    }
    expect(this.seq.replaying).toBe(this.replay !== null);
  }

  deliver(n: number): void {
    for (let i = 0; i < n; i++) {
      const t = this.transit.shift();
      if (t === undefined) return;
      if (t.kind === "live") this.handle(this.seq.live(t.seq, t.p), "other");
      else if (t.kind === "connect") this.handle(this.seq.connected(), "other");
      else this.handle(this.seq.disconnected(), "other");
    }
  }

  reply(n: number): void {
    for (let i = 0; i < n && this.replay !== null; i++) {
      const r = this.replay.shift();
      if (r === undefined) {
        this.end("complete");
        return;
      }
      this.replied++;
      this.handle(this.seq.replayed(r.seq, r.p), "other");
      if (!this.seq.wantsReplies) {
        this.end("stopped");
        return;
      }
    }
  }

  /** complete: the end marker; stopped: the client stopped reading; failed: timeout. */
  end(how: "complete" | "stopped" | "failed"): void {
    if (this.replay === null) return;
    const short = how === "failed" || (how === "complete" && this.replay.length > 0);
    this.replay = null;
    const outcome =
      how === "failed" ? { status: "failed" as const } : { status: "complete" as const };
    this.handle(this.seq.replayEnded(outcome), short || how === "stopped" ? "end-short" : "other");
  }

  run1(c: Command): void {
    switch (c.kind) {
      case "publish":
        this.publish(c.lost);
        return;
      case "deliver":
        this.deliver(c.n);
        return;
      case "reply":
        this.reply(c.n);
        return;
      case "replyHole":
        // A ROUTER drops replies past its HWM: never the first of a request, which goes
        // into an empty queue (the sequencer's "buffer starts later" rule relies on it).
        if (this.replied > 0) this.replay?.shift();
        return;
      case "replyEnd":
        // The end marker arrives only after every reply; with replies left, a stall.
        this.end(this.replay !== null && this.replay.length === 0 ? "complete" : "failed");
        return;
      case "replyCut":
        this.end("failed");
        return;
      case "restart":
        // The old connection's messages and its end are read before the new engine can
        // answer anything.
        this.deliver(this.transit.length);
        this.restarts++;
        this.handle(this.seq.disconnected(), "other");
        this.incarnation++;
        this.next = 0n;
        this.buffer = [];
        this.transit.push({ kind: "connect" });
        this.end("failed"); // the replay socket dies with the engine
        return;
      case "reconnect":
        this.transit.push({ kind: "disconnect" }, { kind: "connect" });
        return;
    }
  }

  /** The network heals: everything is delivered and every replay answered in full. */
  settle(): void {
    this.publish(false);
    for (let i = 0; i < 10_000 && (this.transit.length > 0 || this.replay !== null); i++) {
      if (this.transit.length > 0) this.deliver(this.transit.length);
      while (this.replay !== null) this.reply(this.replay.length + 1);
    }
  }
}

describe("Sequencer against a reference engine", () => {
  it("never applies a batch out of order, never takes a short replay as complete, ends exact", () => {
    fc.assert(
      fc.property(
        fc.array(command, { maxLength: 120 }),
        fc.integer({ min: 2, max: 12 }),
        fc.integer({ min: 0, max: 3 }),
        (commands, bufferSize, maxAttempts) => {
          const w = new World(bufferSize, maxAttempts);
          w.handle(w.seq.start(), "other");
          w.handle(w.seq.connected(), "other");
          for (const c of commands) w.run1(c);
          w.settle();
          expect(w.seq.current).toBe(true);
          expect(w.run.at(-1)).toBe(`${w.incarnation}:${w.next - 1n}`);
          expect(w.seq.lastSeq).toBe(w.next - 1n);
          // No false restarts: a reset for "restart" only when the engine did restart.
          expect(w.restartResets).toBeLessThanOrEqual(w.restarts);
          // No false mismatch: live copies of replayed batches are the replay's bytes.
          expect(w.mismatchResets).toBe(0);
        },
      ),
      { numRuns: 2000 },
    );
  });
});
