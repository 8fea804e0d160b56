import { describe, expect, it } from "vitest";
import { Sequencer, type SequencerAction } from "./sequencer.js";

/** Actions as short strings: `apply 3`, `apply 3 r` (replayed), `replay 4 +0ms`, … */
function show(actions: readonly SequencerAction<string>[]): string[] {
  return actions.map(showOne);
}

function showOne(a: SequencerAction<string>): string {
  switch (a.kind) {
    case "apply":
      return `apply ${a.seq}${a.replayed ? " r" : ""}`;
    case "replay":
      return `replay ${a.from} +${a.delayMs}ms`;
    case "reset":
      return `reset ${a.reason}`;
    case "status":
      return a.current ? "current" : "catching up";
    case "gap":
      return `gap ${a.from}..${a.seen}`;
    case "duplicate":
      return "duplicate";
    case "mismatch":
      return `mismatch ${a.seq}`;
  }
}

type Step =
  | ["start"]
  | ["connect"]
  | ["disconnect"]
  | ["live", number, string?]
  | ["reply", number, string?]
  | ["end"]
  | ["fail"];

function play(
  steps: readonly [Step, string[]][],
  options: { maxAttempts?: number; hasReplay?: boolean } = {},
) {
  const s = new Sequencer<string>({
    firstSeq: 0n,
    hasReplay: options.hasReplay ?? true,
    maxAttempts: options.maxAttempts ?? 2,
    backoffMs: 100,
    backoffMaxMs: 250,
    same: (a, b) => a === b,
  });
  for (const [step, expected] of steps) {
    let out: SequencerAction<string>[];
    switch (step[0]) {
      case "start":
        out = s.start();
        break;
      case "connect":
        out = s.connected();
        break;
      case "disconnect":
        out = s.disconnected();
        break;
      case "live":
        out = s.live(BigInt(step[1]), step[2] ?? `p${step[1]}`);
        break;
      case "reply":
        out = s.replayed(BigInt(step[1]), step[2] ?? `p${step[1]}`);
        break;
      case "end":
        out = s.replayEnded({ status: "complete" });
        break;
      case "fail":
        out = s.replayEnded({ status: "failed" });
        break;
    }
    expect(show(out), JSON.stringify(step)).toEqual(expected);
  }
  return s;
}

/** Start, first contact replays nothing, live from 0: the usual beginning. */
const fresh: [Step, string[]][] = [
  [["start"], ["catching up", "replay 0 +0ms"]],
  [["end"], ["current"]],
  [["live", 0], ["apply 0"]],
  [["live", 1], ["apply 1"]],
];

describe("Sequencer", () => {
  it.each<[string, [Step, string[]][], { maxAttempts?: number; hasReplay?: boolean }?]>([
    ["applies in order", fresh],
    [
      "fills a gap by replay, queued live batches after, duplicates dropped",
      [
        ...fresh,
        [
          ["live", 4],
          ["gap 2..4", "catching up", "replay 2 +0ms"],
        ],
        [["live", 5], []],
        [["reply", 2], ["apply 2 r"]],
        [["reply", 3], ["apply 3 r"]],
        [["reply", 4], ["apply 4 r"]],
        [["end"], ["duplicate", "apply 5", "current"]],
      ],
    ],
    [
      "resumes a replay that stops early from the last applied seq + 1, at once",
      [
        ...fresh,
        [
          ["live", 5],
          ["gap 2..5", "catching up", "replay 2 +0ms"],
        ],
        [["reply", 2], ["apply 2 r"]],
        [["fail"], ["replay 3 +0ms"]],
        [["reply", 3], ["apply 3 r"]],
        [["reply", 4], ["apply 4 r"]],
        [["end"], ["apply 5", "current"]],
      ],
    ],
    [
      "backs off while a replay brings nothing, then clears the worker and goes on live",
      [
        ...fresh,
        [
          ["live", 5],
          ["gap 2..5", "catching up", "replay 2 +0ms"],
        ],
        [["fail"], ["replay 2 +100ms"]],
        [["fail"], ["replay 2 +200ms"]],
        [["fail"], ["reset replay_failed", "apply 5", "current"]],
        [["live", 6], ["apply 6"]],
      ],
    ],
    [
      "never keeps a partial first-contact replay: resumes it even with nothing queued",
      [
        [["start"], ["catching up", "replay 0 +0ms"]],
        [["reply", 0], ["apply 0 r"]],
        [["reply", 1], ["apply 1 r"]],
        [["fail"], ["replay 2 +0ms"]],
        [["fail"], ["replay 2 +100ms"]],
        [["fail"], ["replay 2 +200ms"]],
        [["fail"], ["reset replay_failed", "current"]],
      ],
    ],
    [
      "asks again from a hole inside a replay instead of clearing",
      [
        ...fresh,
        [
          ["live", 6],
          ["gap 2..6", "catching up", "replay 2 +0ms"],
        ],
        [["reply", 2], ["apply 2 r"]],
        [["reply", 4], []],
        [["end"], ["replay 3 +0ms"]],
        [["reply", 3], ["apply 3 r"]],
        [["reply", 4], ["apply 4 r"]],
        [["reply", 5], ["apply 5 r"]],
        [["end"], ["apply 6", "current"]],
      ],
    ],
    [
      "clears when the engine's buffer starts after what is missing",
      [
        ...fresh,
        [
          ["live", 9],
          ["gap 2..9", "catching up", "replay 2 +0ms"],
        ],
        [
          ["reply", 7],
          ["reset unfilled_gap", "apply 7 r"],
        ],
        [["reply", 8], ["apply 8 r"]],
        [["end"], ["apply 9", "current"]],
      ],
    ],
    [
      "treats a seq going back as an engine restart",
      [
        ...fresh,
        [
          ["live", 0, "new0"],
          ["reset restart", "apply 0"],
        ],
      ],
    ],
    [
      "checks the stream after a reconnect: same last batch, carry on",
      [
        ...fresh,
        [["disconnect"], []],
        [["connect"], ["catching up", "replay 1 +0ms"]],
        [["reply", 1], ["duplicate"]],
        [["reply", 2], ["apply 2 r"]],
        [["end"], ["current"]],
      ],
    ],
    [
      "checks the stream after a reconnect: other bytes, a restart",
      [
        ...fresh,
        [["disconnect"], []],
        [["connect"], ["catching up", "replay 1 +0ms"]],
        [["reply", 1, "other"], []],
        [["end"], ["reset restart", "replay 0 +0ms"]],
        [["reply", 0, "n0"], ["apply 0 r"]],
        [["end"], ["current"]],
      ],
    ],
    [
      "replays from 0 when a late engine finally connects",
      [
        [["start"], ["catching up", "replay 0 +0ms"]],
        [["fail"], ["current"]], // no engine yet: nothing held, nothing to clear
        [["connect"], ["catching up", "replay 0 +0ms"]],
        [["reply", 0], ["apply 0 r"]],
        [["reply", 1], ["apply 1 r"]],
        [["end"], ["current"]],
      ],
      { maxAttempts: 0 },
    ],
    [
      "live copies of replayed batches with the same bytes are duplicates, never a mismatch",
      [
        [["start"], ["catching up", "replay 0 +0ms"]],
        [["live", 1], []],
        [["reply", 0], ["apply 0 r"]],
        [["reply", 1], ["apply 1 r"]],
        [["reply", 2], ["apply 2 r"]],
        [["end"], ["duplicate", "current"]],
        [["live", 2], ["duplicate"]],
        [["live", 3], ["apply 3"]],
        [
          ["live", 5],
          ["gap 4..5", "catching up", "replay 4 +0ms"],
        ],
      ],
    ],
    [
      "a queued live batch with other bytes than the replayed one: another stream, replay off",
      [
        [["start"], ["catching up", "replay 0 +0ms"]],
        [["live", 0, "a0"], []],
        [["live", 1, "a1"], []],
        [["reply", 0, "b0"], ["apply 0 r"]],
        [["reply", 1, "b1"], ["apply 1 r"]],
        [["reply", 2, "b2"], ["apply 2 r"]],
        [["end"], ["mismatch 0", "reset replay_mismatch", "apply 0", "apply 1", "current"]],
        [["live", 2, "a2"], ["apply 2"]],
        // From now on, as without a replay endpoint: a gap clears, no replay is asked for.
        [
          ["live", 4, "a4"],
          ["gap 3..4", "reset unfilled_gap", "apply 4"],
        ],
        [["disconnect"], []],
        [["connect"], ["reset unfilled_gap"]],
      ],
    ],
    [
      "a live batch arriving after the replay with other bytes: another stream",
      [
        ...fresh,
        [
          ["live", 4, "a4"],
          ["gap 2..4", "catching up", "replay 2 +0ms"],
        ],
        [["reply", 2, "b2"], ["apply 2 r"]],
        [["reply", 3, "b3"], ["apply 3 r"]],
        [["reply", 4, "b4"], ["apply 4 r"]],
        [["reply", 5, "b5"], ["apply 5 r"]],
        [["end"], ["mismatch 4", "reset replay_mismatch", "apply 4", "current"]],
        [["live", 5, "a5"], ["apply 5"]],
        [
          ["live", 3, "old"],
          ["reset restart", "reset startup_hole", "apply 3"],
        ],
      ],
    ],
    [
      "without a replay endpoint, a gap clears the worker",
      [
        [["start"], []],
        [["live", 0], ["apply 0"]],
        [
          ["live", 3],
          ["gap 1..3", "reset unfilled_gap", "apply 3"],
        ],
      ],
      { hasReplay: false },
    ],
    [
      "without a replay endpoint, a reconnect clears the worker; a gap after it is the same loss",
      [
        [["start"], []],
        [["connect"], []],
        [["live", 0], ["apply 0"]],
        [["disconnect"], []],
        [["connect"], ["reset unfilled_gap"]],
        [
          ["live", 3],
          ["gap 1..3", "apply 3"],
        ],
        [["disconnect"], []],
        [["connect"], ["reset unfilled_gap"]],
        [["disconnect"], []],
        [["connect"], []], // nothing applied since: nothing to clear
        [["live", 4], ["apply 4"]],
      ],
      { hasReplay: false },
    ],
  ])("%s", (_name, steps, options) => {
    play(steps, options);
  });

  it("is not current while catching up", () => {
    const s = new Sequencer<string>({ firstSeq: 0n, hasReplay: true, same: (a, b) => a === b });
    expect(s.current).toBe(true);
    s.start();
    expect(s.current).toBe(false);
    s.replayed(0n, "a");
    s.replayEnded({ status: "failed" });
    expect(s.current).toBe(false); // resuming, not done
    s.replayed(1n, "b");
    s.replayEnded({ status: "complete" });
    expect(s.current).toBe(true);
    expect(s.lastSeq).toBe(1n);
  });

  it("mapHeld replaces the payloads it holds: the last one, queued ones newest first", () => {
    const s = new Sequencer<string>({ firstSeq: 0n, hasReplay: true, same: (a, b) => a === b });
    s.start(); // a first-contact replay is in flight: live batches queue behind it
    s.replayed(0n, "p0");
    for (const n of [1, 2, 3]) s.live(BigInt(n), `p${n}`);
    // Newest first, up to the first payload kept: p1 stays although f would change it.
    const seen: string[] = [];
    s.mapHeld((p) => {
      seen.push(p);
      return p === "p2" ? p : `${p}*`;
    });
    expect(seen).toEqual(["p0", "p3", "p2"]);
    expect(s.lastPayload).toBe("p0*");
    const applied = s
      .replayEnded({ status: "complete" })
      .flatMap((a) => (a.kind === "apply" ? [a.payload] : []));
    expect(applied).toEqual(["p1", "p2", "p3*"]);
    expect(s.lastPayload).toBe("p3*");
  });
});
