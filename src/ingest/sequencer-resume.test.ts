import { describe, expect, it } from "vitest";
import { Sequencer, type SequencerAction } from "./sequencer.js";

/** Actions as short strings (as in sequencer.test.ts). */
function show(actions: readonly SequencerAction<string>[]): string[] {
  return actions.map((a) => {
    switch (a.kind) {
      case "apply":
        return `apply ${a.seq}${a.replayed ? " r" : ""}`;
      case "replay":
        return `replay ${a.from}`;
      case "reset":
        return `reset ${a.reason}`;
      case "status":
        return a.current ? "current" : "catching up";
      default:
        return a.kind;
    }
  });
}

function resumed(last = 9n, payload = "p9", hasReplay = true) {
  const s = new Sequencer<string>({
    firstSeq: 0n,
    hasReplay,
    maxAttempts: 1,
    backoffMs: 1,
    backoffMaxMs: 1,
    same: (a, b) => a === b,
  });
  s.resume(last, payload);
  return s;
}

describe("Sequencer resumed from a snapshot", () => {
  it("same engine: asks for its last batch again, then applies only what follows", () => {
    const s = resumed();
    expect(show(s.start())).toEqual(["catching up", "replay 9"]);
    expect(show(s.live(12n, "p12"))).toEqual([]); // queued behind the replay
    expect(show(s.replayed(9n, "p9"))).toEqual(["duplicate"]);
    expect(show(s.replayed(10n, "p10"))).toEqual(["apply 10 r"]);
    expect(show(s.replayed(11n, "p11"))).toEqual(["apply 11 r"]);
    expect(show(s.replayEnded({ status: "complete" }))).toEqual(["apply 12", "current"]);
    expect(s.lastSeq).toBe(12n);
  });

  it("restarted engine (other bytes under the seq): reset, then replay from 0", () => {
    const s = resumed();
    s.start();
    expect(show(s.replayed(9n, "other"))).toEqual([]);
    expect(show(s.replayEnded({ status: "complete" }))).toEqual(["reset restart", "replay 0"]);
    expect(show(s.replayed(0n, "q0"))).toEqual(["apply 0 r"]);
  });

  it("restarted engine that has not reached the seq: reset", () => {
    const s = resumed();
    s.start();
    expect(show(s.replayEnded({ status: "complete" }))).toEqual(["reset restart", "replay 0"]);
  });

  it("buffer too short (starts after the saved seq): reset, go on from what it holds", () => {
    const s = resumed();
    s.start();
    expect(show(s.replayed(15n, "p15"))).toEqual(["reset unfilled_gap", "apply 15 r"]);
    expect(show(s.replayEnded({ status: "complete" }))).toEqual(["current"]);
  });

  it("engine unreachable until attempts run out: reset (its state is unknown)", () => {
    const s = resumed();
    s.start();
    expect(show(s.replayEnded({ status: "failed" }))).toEqual(["replay 9"]);
    expect(show(s.replayEnded({ status: "failed" }))).toEqual(["reset replay_failed", "current"]);
    expect(s.lastSeq).toBe(null);
  });

  it("cannot resume without a replay endpoint", () => {
    expect(() => resumed(9n, "p9", false)).toThrow(/replay endpoint/);
  });
});
