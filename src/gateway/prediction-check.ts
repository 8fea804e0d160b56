/**
 * The prediction check: the engine's own count of prompt tokens served from its prefix
 * cache (`usage.prompt_tokens_details.cached_tokens`) against the tokens the router
 * predicted that worker held. Off by up to one block is normal (vLLM always recomputes a
 * prompt's last token, so a fully cached block-aligned prompt reports one block less;
 * events of a concurrent request may land after the decision). Consistently off by more
 * is the signature of a mismatch the router cannot see: block size, hash seed
 * (`PYTHONHASHSEED`), tokenizer or chat template, LoRA naming. Each check is exported
 * (histogram of the signed error, per-worker over/under counters); a worker whose recent
 * checks are mostly wrong gets a rate-limited warning naming what to check.
 */

import type { LogSink } from "../util/log-sink.js";

export type PredictionOutcome = "match" | "over" | "under";

export interface PredictionSample {
  readonly worker: string;
  readonly predicted: number;
  readonly actual: number;
  readonly promptTokens: number;
  readonly blockSize: number;
}

export interface PredictionSinks {
  observe(worker: string, errorTokens: number, outcome: PredictionOutcome): void;
  warned(worker: string): void;
}

export interface PredictionCheckOptions {
  /** Warn when at least this fraction of the recent window is wrong. */
  readonly warnRatio: number;
  readonly warnIntervalMs: number;
  /** Checks remembered per worker. */
  readonly window?: number;
  /** No warning before this many checks of a worker. */
  readonly minSamples?: number;
  readonly nowMs?: () => number;
}

interface WorkerWindow {
  readonly wrong: boolean[];
  next: number;
  filled: number;
  wrongCount: number;
  lastWarnMs: number;
}

export const HINT =
  "check that index.blockSize equals the engine's --block-size, that the engine runs with PYTHONHASHSEED=0 (or the hash the router expects), that the gateway tokenizes with the engine's tokenizer and chat template, and that LoRA names match (docs/gateway.md)";

export class PredictionCheck {
  readonly #opts: Required<PredictionCheckOptions>;
  readonly #sinks: PredictionSinks;
  readonly #log: LogSink;
  readonly #byWorker = new Map<string, WorkerWindow>();

  constructor(opts: PredictionCheckOptions, sinks: PredictionSinks, log: LogSink) {
    this.#opts = { window: 20, minSamples: 10, nowMs: Date.now, ...opts };
    this.#sinks = sinks;
    this.#log = log;
  }

  record(s: PredictionSample): PredictionOutcome {
    const error = s.actual - s.predicted;
    const outcome: PredictionOutcome =
      Math.abs(error) <= s.blockSize ? "match" : error < 0 ? "over" : "under";
    this.#sinks.observe(s.worker, error, outcome);
    const w = this.#window(s.worker);
    const wrong = outcome !== "match";
    if (w.filled === w.wrong.length && w.wrong[w.next]) w.wrongCount--;
    w.wrong[w.next] = wrong;
    if (wrong) w.wrongCount++;
    w.next = (w.next + 1) % w.wrong.length;
    w.filled = Math.min(w.filled + 1, w.wrong.length);
    const now = this.#opts.nowMs();
    if (
      w.filled >= this.#opts.minSamples &&
      w.wrongCount / w.filled >= this.#opts.warnRatio &&
      w.wrongCount > 0 &&
      now - w.lastWarnMs >= this.#opts.warnIntervalMs
    ) {
      w.lastWarnMs = now;
      this.#sinks.warned(s.worker);
      this.#log.warn(
        {
          worker: s.worker,
          wrong: w.wrongCount,
          checks: w.filled,
          last: { predicted: s.predicted, engine: s.actual, prompt_tokens: s.promptTokens },
          hint: HINT,
        },
        `prediction check: ${w.wrongCount} of the last ${w.filled} requests on ${s.worker} had a cached-token count off by more than one block from the router's prediction`,
      );
    }
    return outcome;
  }

  #window(worker: string): WorkerWindow {
    let w = this.#byWorker.get(worker);
    if (w === undefined) {
      w = {
        wrong: new Array<boolean>(this.#opts.window).fill(false),
        next: 0,
        filled: 0,
        wrongCount: 0,
        lastWarnMs: -Infinity,
      };
      this.#byWorker.set(worker, w);
    }
    return w;
  }
}
