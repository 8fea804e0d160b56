/**
 * FALLBACK provider, to be replaced at merge by `src/tokenize/`'s provider: one
 * `WorkerTokenizeFallback` per model, each asking a healthy worker serving the model
 * (round robin over them) for the token ids.
 */

import type { Agent } from "undici";
import type { WorkerRegistry } from "../load/worker-registry.js";
import type { PromptTokenizer } from "../tokenize/types.js";
import { WorkerTokenizeFallback } from "./worker-tokenize-fallback.js";

export interface WorkerTokenizersOptions {
  readonly registry: WorkerRegistry;
  readonly agent: Agent;
  readonly timeoutMs: number;
  readonly authorization: () => string | null;
  /** Whether a worker (by id) may be asked now (its circuit is not open). */
  readonly healthy: (workerId: string) => boolean;
}

export function workerTokenizers(
  o: WorkerTokenizersOptions,
): (model: string) => PromptTokenizer | null {
  const byModel = new Map<string, PromptTokenizer>();
  let next = 0;
  return (model) => {
    let t = byModel.get(model);
    if (t === undefined) {
      t = new WorkerTokenizeFallback({
        model,
        timeoutMs: o.timeoutMs,
        agent: o.agent,
        authorization: o.authorization(),
        pickWorker: () => {
          const urls = o.registry
            .routable(model === "" ? null : model)
            .filter((w) => o.healthy(w.workerId))
            .map((w) => w.url);
          return urls.length === 0 ? null : urls[next++ % urls.length]!;
        },
      });
      byModel.set(model, t);
    }
    return t;
  };
}
