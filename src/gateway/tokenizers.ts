/**
 * The gateway's tokenizer per model. A model with a local tokenizer (`gateway.tokenizers`:
 * its `tokenizer.json` + `tokenizer_config.json`, loaded at start-up) is tokenized
 * in-process; any other model asks a healthy worker serving it for the ids (vLLM's
 * `POST /tokenize`, `RemoteTokenizer`, `gateway.tokenizeTimeoutMs`), round robin over
 * those workers. A failure there is the caller's to count; the request is still served.
 */

import type { TokenizerSpec } from "../config/tokenizer-specs.js";
import type { WorkerRegistry } from "../load/worker-registry.js";
import {
  type ChatRequestLike,
  type LocalTokenizer,
  loadModelTokenizer,
  type PromptTokenizer,
  RemoteTokenizer,
  TokenizeError,
  type TokenizeResult,
} from "../tokenize/index.js";

export interface GatewayTokenizersOptions {
  readonly registry: WorkerRegistry;
  readonly timeoutMs: number;
  /** `Authorization` for workers' `/tokenize` (the configured worker key), or null. */
  readonly authorization: string | null;
  /** Whether a worker (by id) may be asked now (its circuit is not open). */
  readonly healthy: (workerId: string) => boolean;
}

/**
 * Load every configured model directory and start its tokenizer threads; throws naming
 * the key, the model and the file.
 */
export async function loadLocalTokenizers(
  specs: readonly TokenizerSpec[],
  /** `gateway.tokenizerThreads`: worker threads per tokenizer (0: the event loop). */
  threads = 1,
): Promise<Map<string | null, LocalTokenizer>> {
  const out = new Map<string | null, LocalTokenizer>();
  try {
    for (const s of specs) {
      const name = s.model ?? undefined;
      try {
        out.set(
          s.model,
          await loadModelTokenizer(
            s.dir,
            name === undefined ? { threads } : { model: name, threads },
          ),
        );
      } catch (err) {
        const which = s.model === null ? "default tokenizer" : `model ${JSON.stringify(s.model)}`;
        throw new Error(`gateway.tokenizers: ${which}: ${(err as Error).message}`, { cause: err });
      }
    }
  } catch (err) {
    await Promise.all([...out.values()].map((t) => t.close()));
    throw err;
  }
  // The worker threads load while the service starts, not on the first requests.
  for (const t of out.values()) t.warmThreads();
  return out;
}

export class GatewayTokenizers {
  readonly #locals: ReadonlyMap<string | null, LocalTokenizer>;
  readonly #o: GatewayTokenizersOptions;
  readonly #remote = new Map<string, WorkerTokenizer>();
  /** One RemoteTokenizer per (worker URL, model). */
  readonly #byWorker = new Map<string, RemoteTokenizer>();
  #next = 0;

  constructor(locals: ReadonlyMap<string | null, LocalTokenizer>, o: GatewayTokenizersOptions) {
    this.#locals = locals;
    this.#o = o;
  }

  /** Local tokenizers by model (null key: the default), for metrics and docs. */
  get locals(): ReadonlyMap<string | null, LocalTokenizer> {
    return this.#locals;
  }

  /** The tokenizer for a model ("" when the request names none). */
  for(model: string): PromptTokenizer {
    const local = this.#locals.get(model) ?? this.#locals.get(null);
    if (local !== undefined) return local;
    let t = this.#remote.get(model);
    if (t === undefined) {
      t = new WorkerTokenizer(model, () => this.#pick(model));
      this.#remote.set(model, t);
    }
    return t;
  }

  #pick(model: string): RemoteTokenizer | null {
    const urls = this.#o.registry
      .routable(model === "" ? null : model)
      .filter((w) => this.#o.healthy(w.workerId))
      .map((w) => w.url);
    const unique = [...new Set(urls)];
    if (unique.length === 0) return null;
    const url = unique[this.#next++ % unique.length]!;
    const key = `${url}\n${model}`;
    let t = this.#byWorker.get(key);
    if (t === undefined) {
      t = new RemoteTokenizer({
        baseUrl: url,
        model,
        timeoutMs: this.#o.timeoutMs,
        authorization: this.#o.authorization,
      });
      this.#byWorker.set(key, t);
    }
    return t;
  }

  async close(): Promise<void> {
    await Promise.all([
      ...[...this.#locals.values()].map((t) => t.close()),
      ...[...this.#byWorker.values()].map((t) => t.close()),
    ]);
  }
}

/** A model's remote tokenizer: each call goes to a healthy worker serving the model. */
class WorkerTokenizer implements PromptTokenizer {
  constructor(
    readonly model: string,
    readonly pick: () => RemoteTokenizer | null,
  ) {}

  tokenizeCompletion(prompt: string, addSpecialTokens = true): Promise<TokenizeResult> {
    return this.#worker().tokenizeCompletion(prompt, addSpecialTokens);
  }

  tokenizeChat(request: ChatRequestLike): Promise<TokenizeResult> {
    return this.#worker().tokenizeChat(request);
  }

  #worker(): RemoteTokenizer {
    const t = this.pick();
    if (t === null) {
      throw new TokenizeError("unreachable", `no healthy worker serves ${this.model} to tokenize`);
    }
    return t;
  }

  async close(): Promise<void> {}
}
