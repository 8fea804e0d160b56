/**
 * `kvrouter demo` (`npm run demo`): the router and N simulated vLLM workers on loopback,
 * one workload sent twice — routed by kvrouter, then round-robin on the same workers with
 * their prefix caches reset — and the two side by side. It ends by itself and stops every
 * process it started, on success, on error, on SIGINT/SIGTERM/SIGHUP and when its parent process ends.
 *
 * Progress goes to stderr; the table (and with `--json` one JSON object, last) to stdout.
 */

import { setMaxListeners } from "node:events";
import { constants } from "node:os";
import { STOP_SIGNALS } from "../lifetime.js";
import { ChildGroup } from "./child-group.js";
import { type DemoFleet, type DemoWorker, launchFleet } from "./demo-fleet.js";
import { DEMO_USAGE, type DemoOptions, DemoUsageError, parseDemoArgs } from "./demo-options.js";
import { type PhaseResult, type Policy, runPhase } from "./run-phase.js";
import { streamCompletion } from "./stream-completion.js";
import {
  formatComparison,
  formatPredictionCheck,
  predictionCheckOf,
  summarise,
} from "./summary.js";
import { generateWorkload, textOf, type Workload } from "./workload.js";

const RESET_TIMEOUT_MS = 10_000;

const progress = (line: string) => process.stderr.write(`demo: ${line}\n`);

/** Reject as soon as `signal` aborts, so start-up waits do not outlive a Ctrl-C. */
function abortable<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    if (signal.aborted) onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

/** Empty every worker's prefix cache (retrying while a request still holds blocks). */
async function resetCaches(workers: readonly DemoWorker[], signal: AbortSignal): Promise<void> {
  await Promise.all(
    workers.map(async (w) => {
      const deadline = Date.now() + RESET_TIMEOUT_MS;
      for (;;) {
        const res = await fetch(`${w.url}/reset_prefix_cache`, { method: "POST", signal });
        const text = await res.text();
        if (res.ok) return;
        if (res.status !== 409 || Date.now() > deadline) {
          throw new Error(`${w.id}: POST /reset_prefix_cache: HTTP ${res.status} ${text}`);
        }
        await new Promise((r) => setTimeout(r, 100));
      }
    }),
  );
}

function describe(opts: DemoOptions, workload: Workload): string {
  const s = opts.sim;
  const systems = workload.systemPrompts.map((p) => p.length).join(", ");
  return [
    `${opts.workers} simulated workers: prefill ${s.prefillTokensPerS} tokens/s, decode ${s.decodeMsPerToken} ms/token,`,
    `  ${s.numGpuBlocks} KV blocks x ${s.blockSize} tokens, at most ${s.maxNumSeqs} running sequences each`,
    `workload (seed ${opts.seed}): ${workload.conversations.length} conversations, ${workload.requests} requests,`,
    `  ${workload.systemPrompts.length} shared system prompts (${systems} tokens)`,
  ].join("\n");
}

/** `--stay`: the fleet runs until a signal; the router's API is the whole interface. */
async function stay(opts: DemoOptions, group: ChildGroup, signal: AbortSignal): Promise<number> {
  const fleet = await abortable(launchFleet(group, opts.workers, opts.sim, opts.seed), signal);
  try {
    const lines = fleet.workers.map((w) => `  ${w.id.padEnd(8)} ${w.url}  (pid ${w.pid})`);
    process.stdout.write(
      `kvrouter is routing for ${opts.workers} simulated vLLM workers:\n` +
        `  router   ${fleet.routerUrl}  (pid ${fleet.routerPid})\n${lines.join("\n")}\n\n` +
        `try:  curl -s ${fleet.routerUrl}/v1/workers\n` +
        `      curl -s ${fleet.routerUrl}/v1/completions -H 'content-type: application/json' -d '{"model":"sim-model","prompt":"Hello","max_tokens":8}'\n` +
        `      curl -s ${fleet.routerUrl}/v1/route -H 'content-type: application/json' -d '{"token_ids":[1,2,3]}'\n` +
        "Ctrl-C stops everything.\n",
    );
    await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve()));
    return 0;
  } finally {
    await fleet.cleanup();
  }
}

async function runDemo(opts: DemoOptions, group: ChildGroup, signal: AbortSignal): Promise<number> {
  if (opts.stay) return stay(opts, group, signal);
  const workload = generateWorkload(opts.workload, opts.seed);
  progress(`starting the router and ${opts.workers} simulated workers…`);
  let fleet: DemoFleet | null = null;
  try {
    fleet = await abortable(launchFleet(group, opts.workers, opts.sim, opts.seed), signal);
    const pids = { router: fleet.routerPid, workers: fleet.workers.map((w) => w.pid) };
    progress(
      `router ${fleet.routerUrl} (pid ${pids.router}), workers pids ${pids.workers.join(", ")}`,
    );
    // Real tokenization is JIT-compiled on first use in every process: warm each worker
    // and the gateway once, so neither phase pays for it (caches are reset below).
    const warm = textOf(Array.from({ length: 400 }, (_, i) => i));
    for (const url of [...fleet.workers.map((w) => w.url), fleet.routerUrl]) {
      const msgs = [{ role: "user" as const, content: warm }];
      await streamCompletion(url, msgs, 2, () => {}, signal);
    }
    const results = {} as Record<Policy, PhaseResult>;
    for (const policy of ["kv", "round-robin"] as const) {
      await resetCaches(fleet.workers, signal);
      progress(`${policy}: sending ${workload.requests} requests…`);
      results[policy] = await runPhase(policy, workload, fleet, signal);
      progress(`${policy}: done in ${(results[policy].wallMs / 1000).toFixed(1)} s`);
    }
    const metrics = await (await fetch(`${fleet.routerUrl}/metrics`, { signal })).text();
    const prediction = predictionCheckOf(metrics);
    const ids = fleet.workers.map((w) => w.id);
    const kv = summarise(results.kv, ids);
    const rr = summarise(results["round-robin"], ids);
    process.stdout.write(
      `\n${describe(opts, workload)}\n\n${formatComparison(kv, rr)}\n${formatPredictionCheck(prediction)}\n`,
    );
    const errors = [...results.kv.errors, ...results["round-robin"].errors];
    for (const e of errors.slice(0, 10)) process.stderr.write(`demo: request failed: ${e}\n`);
    if (opts.json) {
      const out = {
        seed: opts.seed,
        workers: opts.workers,
        conversations: workload.conversations.length,
        requests: workload.requests,
        sim: opts.sim,
        pids,
        kv,
        roundRobin: rr,
        predictionCheck: prediction,
      };
      process.stdout.write(`${JSON.stringify(out)}\n`);
    }
    return errors.length === 0 ? 0 : 1;
  } finally {
    await fleet?.cleanup();
  }
}

/** Run the demo; returns the exit code (128 + the signal's number when interrupted). */
export async function main(argv: string[]): Promise<number> {
  let opts: DemoOptions | "help";
  try {
    opts = parseDemoArgs(argv);
  } catch (err) {
    if (!(err instanceof DemoUsageError)) throw err;
    process.stderr.write(`kvrouter demo: ${err.message}\n\n${DEMO_USAGE}`);
    return 2;
  }
  if (opts === "help") {
    process.stdout.write(DEMO_USAGE);
    return 0;
  }
  const group = new ChildGroup();
  const abort = new AbortController();
  // Every pending sleep and fetch of every conversation listens to this one signal.
  setMaxListeners(0, abort.signal);
  let caught: NodeJS.Signals | null = null;
  const onSignal = (signal: NodeJS.Signals) => {
    caught ??= signal;
    abort.abort(new Error(`interrupted by ${signal}`));
  };
  for (const s of STOP_SIGNALS) process.on(s, onSignal);
  try {
    // With --stay a signal is the normal way to stop: it returns 0.
    return await runDemo(opts, group, abort.signal);
  } catch (err) {
    if (caught !== null) {
      progress(`interrupted by ${caught}; stopping`);
      return 128 + (constants.signals[caught] ?? 15);
    }
    process.stderr.write(`kvrouter demo: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  } finally {
    await group.stopAll();
    for (const s of STOP_SIGNALS) process.off(s, onSignal);
  }
}
