/**
 * Runs the workload once under one routing policy, the way a gateway in front of the
 * workers would: every conversation is a closed loop (send a turn, read the streamed reply,
 * think, send the next), all conversations concurrently on the workload's schedule.
 *
 * - `kv`: ask the router (`POST /v1/route`), send to the worker it chose, report
 *   `first-token` and `done` back so its in-flight load stays right.
 * - `round-robin`: the next worker in turn, no router involved.
 *
 * Time to first token is measured on the client from the moment the request is ready to
 * go, so for `kv` it includes the routing call.
 */

import { setTimeout as sleep } from "node:timers/promises";
import type { SimTokenizer } from "../sim/tokenizer.js";
import type { DemoWorker } from "./demo-fleet.js";
import { streamCompletion } from "./stream-completion.js";
import { PromptBuilder, type Workload } from "./workload.js";

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

interface Choice {
  readonly worker: DemoWorker;
  readonly predicted: number | null;
}

interface Chooser {
  choose(prompt: readonly number[], requestId: string, signal: AbortSignal): Promise<Choice>;
  /** Report a lifecycle event to the router (kv) or nothing (round-robin); never rejects. */
  report(requestId: string, event: "first-token" | "done"): Promise<void>;
}

function roundRobin(workers: readonly DemoWorker[]): Chooser {
  let next = 0;
  return {
    choose: async () => ({ worker: workers[next++ % workers.length]!, predicted: null }),
    report: async () => {},
  };
}

function kvRouter(routerUrl: string, workers: readonly DemoWorker[], errors: string[]): Chooser {
  const byId = new Map(workers.map((w) => [w.id, w]));
  return {
    async choose(prompt, requestId, signal) {
      const res = await fetch(`${routerUrl}/v1/route`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ token_ids: prompt, model: "sim-model", request_id: requestId }),
        signal,
      });
      const body = (await res.json()) as {
        worker?: { id?: string };
        cached_tokens?: number;
        error?: unknown;
      };
      const worker = byId.get(body.worker?.id ?? "");
      if (!res.ok || worker === undefined) {
        throw new Error(`POST /v1/route: HTTP ${res.status} ${JSON.stringify(body)}`);
      }
      return { worker, predicted: body.cached_tokens ?? 0 };
    },
    report(requestId, event) {
      return fetch(`${routerUrl}/v1/requests/${encodeURIComponent(requestId)}/${event}`, {
        method: "POST",
      }).then(
        async (res) => {
          if (!res.ok) errors.push(`${event} ${requestId}: HTTP ${res.status} ${await res.text()}`);
        },
        (err: unknown) => {
          errors.push(`${event} ${requestId}: ${String(err)}`);
        },
      );
    },
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
  target: PhaseTarget,
  tokenizer: SimTokenizer,
  signal: AbortSignal,
): Promise<PhaseResult> {
  const errors: string[] = [];
  const records: RequestRecord[] = [];
  const reports: Promise<void>[] = [];
  const chooser =
    policy === "kv"
      ? kvRouter(target.routerUrl, target.workers, errors)
      : roundRobin(target.workers);
  const builder = new PromptBuilder(tokenizer);
  const start = performance.now();

  const conversation = async (c: Workload["conversations"][number]) => {
    await sleep(c.startMs, undefined, { signal });
    const system = workload.systemPrompts[c.systemPrompt]!;
    let prompt: number[] = [];
    let reply: number[] = [];
    for (const [t, turn] of c.turns.entries()) {
      if (turn.thinkMs > 0) await sleep(turn.thinkMs, undefined, { signal });
      prompt =
        t === 0
          ? builder.first(system, turn.userTokens)
          : builder.next(prompt, reply, turn.userTokens);
      const requestId = `${policy}-c${c.id}-t${t}`;
      const t0 = performance.now();
      try {
        const choice = await chooser.choose(prompt, requestId, signal);
        const routed = performance.now();
        let firstReported: Promise<void> = Promise.resolve();
        const out = await streamCompletion(
          choice.worker.url,
          prompt,
          turn.maxTokens,
          tokenizer,
          () => {
            firstReported = chooser.report(requestId, "first-token");
          },
          signal,
        );
        // "done" after "first-token" has been answered, so the router sees them in order.
        reports.push(firstReported.then(() => chooser.report(requestId, "done")));
        reply = out.replyTokens;
        records.push({
          conversation: c.id,
          turn: t,
          worker: choice.worker.id,
          promptTokens: out.usage.promptTokens,
          cachedTokens: out.usage.cachedTokens,
          predictedCachedTokens: choice.predicted,
          ttftMs: out.firstTokenAt - t0,
          e2eMs: performance.now() - t0,
          routeMs: policy === "kv" ? routed - t0 : null,
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
  await Promise.all(reports);
  return { policy, records, errors, wallMs };
}
