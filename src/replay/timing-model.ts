/**
 * The replay's timing model of one simulated worker, in virtual time. Deliberately
 * simple and documented (docs/replay.md) so results can be reasoned about:
 *
 * - prefill is the scarce resource: one worker computes one prompt at a time, FIFO, at
 *   `prefillTokensPerSec` uncached tokens per second plus `prefillOverheadMs` per
 *   request (scheduling and the step that emits the first token). That is the
 *   throughput of chunked prefill, where prompts share steps but not FLOPs;
 * - decoding runs beside prefill (its FLOPs are small): each further output token takes
 *   `decodeMsPerToken`; a request holds one of `maxNumSeqs` running slots and its KV
 *   blocks from the start of its prefill until its last token;
 * - requests that cannot start (prefill busy, no slot, or no free KV blocks) wait in a
 *   FIFO queue, like vLLM's waiting queue with FCFS scheduling.
 */

export interface TimingModel {
  /** Uncached prompt tokens one worker computes per second. */
  readonly prefillTokensPerSec: number;
  /** Fixed time per prefill, ms (includes the step producing the first token). */
  readonly prefillOverheadMs: number;
  /** Time per output token after the first, ms. */
  readonly decodeMsPerToken: number;
  /** Most requests running (prefilling or decoding) at once on a worker. */
  readonly maxNumSeqs: number;
}

/** Defaults chosen so round-robin runs the conversation trace on 8 workers at ~85 % prefill utilisation. */
export const DEFAULT_TIMING: TimingModel = Object.freeze({
  prefillTokensPerSec: 5_200,
  prefillOverheadMs: 20,
  decodeMsPerToken: 25,
  maxNumSeqs: 64,
});

/** Prefill duration (ms) of a prompt with `uncachedTokens` to compute. */
export function prefillMs(t: TimingModel, uncachedTokens: number): number {
  return t.prefillOverheadMs + (uncachedTokens * 1000) / t.prefillTokensPerSec;
}

/** Decode duration (ms) after the first token. */
export function decodeMs(t: TimingModel, outputTokens: number): number {
  return Math.max(0, outputTokens - 1) * t.decodeMsPerToken;
}

/** Check a timing model; returns the name of the first bad field, or null. */
export function invalidTimingField(t: TimingModel): string | null {
  if (!(t.prefillTokensPerSec > 0) || !Number.isFinite(t.prefillTokensPerSec))
    return "prefillTokensPerSec";
  if (!(t.prefillOverheadMs >= 0) || !Number.isFinite(t.prefillOverheadMs))
    return "prefillOverheadMs";
  if (!(t.decodeMsPerToken >= 0) || !Number.isFinite(t.decodeMsPerToken)) return "decodeMsPerToken";
  if (!Number.isSafeInteger(t.maxNumSeqs) || t.maxNumSeqs < 1) return "maxNumSeqs";
  return null;
}
