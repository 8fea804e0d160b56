/**
 * The replay's timing model of one simulated worker, in virtual time. Deliberately
 * simple and documented (docs/replay.md) so results can be reasoned about. The rules,
 * parameters and formulas are the simulated worker's (`src/sim/timing.ts`), defined once
 * so the replay and `kvrouter sim-worker` tell the same story:
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
 *
 * What stays here is the replay's own default, on which docs/replay.md's results rest.
 */

import type { TimingModel } from "../sim/timing.js";

export type { TimingModel } from "../sim/timing.js";
export { decodeMs, invalidTimingField, prefillMs } from "../sim/timing.js";

/** Defaults chosen so round-robin runs the conversation trace on 8 workers at ~85 % prefill utilisation. */
export const DEFAULT_TIMING: TimingModel = Object.freeze({
  prefillTokensPerSec: 5_200,
  prefillOverheadMs: 20,
  decodeMsPerToken: 25,
  maxNumSeqs: 64,
});
