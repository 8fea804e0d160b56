/**
 * Runs the workload once under one routing policy: every conversation is a closed loop
 * (send a turn, read the streamed reply, think, send the next), all conversations
 * concurrently on the workload's schedule.
 *
 * - `kv`: stream `POST /v1/completions` to kvrouter's gateway, like any OpenAI client; the
 *   gateway routes, forwards and records the request's lifecycle itself. The chosen
 *   worker and the router's prediction come back in `x-kvrouter-*` headers.
 * - `round-robin`: straight to the next worker in turn, no router involved.
 *
 * Time to first token is measured on the client from the moment the request is ready to
 * go, so for `kv` it includes everything the gateway does.
 */

import { setTimeout as sleep } from "node:timers/promises";
import type { DemoWorker } from "./demo-fleet.js";
import { type ChatMessage, streamCompletion } from "./stream-completion.js";
import { textOf, type Workload } from "./workload.js";

export type Policy = "kv" | "round-robin";

/** One finished request, as the client saw it. */
export interface RequestRecord {
  readonly conversation: number;
  readonly turn: number;
  readonly worker: string;
  readonly promptTokens: number;
  /** Prompt tokens the worker's prefix cache served (`usage…cached_tokens`). */
  readonly cachedTokens: number;
  /** What the router expected the chosen worker to hold (kv only). */
  readonly predictedCachedTokens: number | null;
  readonly ttftMs: number;
  /** Request ready → last token. */
  readonly e2eMs: number;
  /** Duration of the `POST /v1/route` call (kv only). */
  readonly routeMs: number | null;
}

export interface PhaseResult {
  readonly policy: Policy;
  readonly records: readonly RequestRecord[];
  /** One message per failed request (its conversation stops there). */
  readonly errors: readonly string[];
  readonly wallMs: number;
}

/** Where the next request goes: the gateway (kv) or the next worker (round-robin). */
function target(policy: Policy, t: PhaseTarget): () => { url: string; worker: string | null } {
  let next = 0;
  if (policy === "kv") return () => ({ url: t.routerUrl, worker: null });
  return () => {
    const w = t.workers[next++ % t.workers.length]!;
    return { url: w.url, worker: w.id };
  };
}

export interface PhaseTarget {
  readonly workers: readonly DemoWorker[];
  readonly routerUrl: string;
}

/** Run every conversation of `workload` under `policy`; resolves when all are finished. */
export async function runPhase(
  policy: Policy,
  workload: Workload,
  fleet: PhaseTarget,
  signal: AbortSignal,
): Promise<PhaseResult> {
  const errors: string[] = [];
  const records: RequestRecord[] = [];
  const nextTarget = target(policy, fleet);
  const start = performance.now();

  const conversation = async (c: Workload["conversations"][number]) => {
    await sleep(c.startMs, undefined, { signal });
    const system = workload.systemPrompts[c.systemPrompt]!;
    const messages: ChatMessage[] = [{ role: "system", content: textOf(system) }];
    for (const [t, turn] of c.turns.entries()) {
      if (turn.thinkMs > 0) await sleep(turn.thinkMs, undefined, { signal });
      messages.push({ role: "user", content: textOf(turn.userTokens) });
      const requestId = `${policy}-c${c.id}-t${t}`;
      const t0 = performance.now();
      try {
        const to = nextTarget();
        const out = await streamCompletion(to.url, messages, turn.maxTokens, () => {}, signal);
        messages.push({ role: "assistant", content: out.replyText });
        // Through the gateway: the worker key (`id#rank`) and the router's prediction.
        const key = out.headers.get("x-kvrouter-worker");
        const predicted = out.headers.get("x-kvrouter-cached-tokens");
        records.push({
          conversation: c.id,
          turn: t,
          worker: to.worker ?? key?.split("#")[0] ?? "?",
          promptTokens: out.usage.promptTokens,
          cachedTokens: out.usage.cachedTokens,
          predictedCachedTokens: predicted === null ? null : Number(predicted),
          ttftMs: out.firstTokenAt - t0,
          e2eMs: performance.now() - t0,
          routeMs: null,
        });
      } catch (err) {
        if (signal.aborted) throw err;
        errors.push(`${requestId}: ${err instanceof Error ? err.message : String(err)}`);
        return;
      }
    }
  };

  await Promise.all(workload.conversations.map(conversation));
  const wallMs = performance.now() - start;
  return { policy, records, errors, wallMs };
}
