/**
 * A snapshot capture taken in steps (docs/index.md, "The copy in steps"): the index's
 * tables are copied 1 MB per step, as one resumable task in the queue that applies KV
 * events (`ApplySlicer.runSteps`), so events wait behind it in order while routing, which
 * only reads, goes on between its turns. The copy starts in the task's own first step
 * (not when it is queued: tasks ahead of it still apply) and the streams' saved positions
 * are read in its last, so they match the copy. A change that does not go through the
 * queue spoils the copy (the index counts its changes): it is taken once more in steps,
 * and after that in one go.
 */

import type { CaptureJob, IndexCapture, SnapshotAccess } from "../index/snapshot-access.js";
import type { SavedStream, SnapshotCapture } from "../index/snapshot-codec.js";

/** Words of the index's tables copied per step (1 MB). */
export const CAPTURE_STEP_WORDS = 1 << 18;

/**
 * Runs a resumable task in order with the KV event applies (`ApplySlicer.runSteps`): while
 * it has steps left, no queued event is applied.
 */
export interface StepRunner {
  runSteps(step: () => boolean): void;
}

export interface CaptureInSteps {
  readonly cap: SnapshotCapture;
  /** The longest single step, ms: the longest event-loop pause the capture caused. */
  readonly longestMs: number;
  /** Copies spoiled by a change outside the queue (0–2). */
  readonly spoiled: number;
}

export function captureInSteps(
  runner: StepRunner,
  access: SnapshotAccess,
  streams: () => SavedStream[],
  nowMs: () => number,
): Promise<CaptureInSteps> {
  return new Promise((resolve, reject) => {
    let job: CaptureJob | null = null;
    let spoiled = 0;
    let longestMs = 0;
    runner.runSteps(() => {
      const t0 = performance.now();
      try {
        job ??= access.beginCapture();
        if (job.step(CAPTURE_STEP_WORDS)) return true;
        let index: IndexCapture | null = job.finish();
        if (index === null) {
          spoiled++;
          if (spoiled < 2) {
            job = access.beginCapture();
            return true;
          }
          index = access.capture();
        }
        const cap: SnapshotCapture = {
          index,
          streams: streams().map((s) => ({ ...s, lastBatch: s.lastBatch.slice() })),
          createdAtMs: nowMs(),
        };
        longestMs = Math.max(longestMs, performance.now() - t0);
        resolve({ cap, longestMs, spoiled });
      } catch (err) {
        reject(err);
      } finally {
        longestMs = Math.max(longestMs, performance.now() - t0);
      }
      return false;
    });
  });
}
