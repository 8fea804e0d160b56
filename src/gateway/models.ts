/**
 * `GET /v1/models`: the union of the models the fleet serves, in OpenAI's list shape.
 * A worker declared with a model contributes it and the LoRA adapters it lists for that
 * model; a worker declared without one contributes everything it lists (its own
 * `GET /v1/models`, short timeout, answers cached for `ttlMs`). A worker that does not
 * answer contributes only its declared model this time.
 *
 * LoRA adapters (`adapter`): vLLM lists each loaded adapter in `/v1/models` as a card
 * whose `id` is the adapter's name and whose `parent` is its base model
 * (`OpenAIServingModels.show_available_models`, vllm `vllm/entrypoints/openai/serving_models.py`).
 * A request naming an adapter goes to the workers listing it, tokenized as its parent.
 * Every worker is asked; a known adapter is served from answers up to `ttlMs` old (older
 * ones are refreshed in the background), an unknown name re-asks workers whose answer is
 * older than `refreshUnknownMs` before it is refused, so an adapter loaded at run time
 * (`/v1/load_lora_adapter`) is found on its first request.
 */

import { type Agent, request } from "undici";

export interface ModelEntry {
  readonly id: string;
  readonly object: "model";
  readonly created: number;
  readonly owned_by: string;
}

export interface ModelSource {
  readonly url: string;
  readonly model: string | null;
}

/** Where a LoRA adapter is served: its base model and the URLs of the workers listing it. */
export interface AdapterTarget {
  readonly parent: string;
  readonly urls: ReadonlySet<string>;
}

interface Card {
  readonly id: string;
  readonly parent: string | null;
}

interface Answer {
  readonly atMs: number;
  readonly cards: readonly Card[];
}

export class ModelCatalog {
  readonly #agent: Agent;
  readonly #ttlMs: number;
  readonly #timeoutMs: number;
  readonly #refreshUnknownMs: number;
  readonly #asked = new Map<string, Answer>();
  readonly #asking = new Map<string, Promise<readonly Card[]>>();
  readonly #created = Math.floor(Date.now() / 1000);

  constructor(
    agent: Agent,
    opts: { ttlMs?: number; timeoutMs?: number; refreshUnknownMs?: number } = {},
  ) {
    this.#agent = agent;
    this.#ttlMs = opts.ttlMs ?? 10_000;
    this.#timeoutMs = opts.timeoutMs ?? 1000;
    this.#refreshUnknownMs = opts.refreshUnknownMs ?? 1000;
  }

  /**
   * The workers serving LoRA adapter `name` (by URL) and its base model, or null when no
   * worker lists it. Workers listing it under another parent than the first one found
   * are left out (an adapter name means one adapter).
   */
  async adapter(
    name: string,
    workers: readonly string[],
    authorization: string | null,
  ): Promise<AdapterTarget | null> {
    const urls = [...new Set(workers)];
    const now = Date.now();
    const fresh = await Promise.all(
      urls.map((u) => {
        const a = this.#asked.get(u);
        if (a === undefined) return this.#ask(u, authorization);
        if (now - a.atMs >= this.#ttlMs) void this.#ask(u, authorization);
        return a.cards;
      }),
    );
    let found = pick(name, urls, fresh);
    if (found !== "unknown") return found;
    const again = await Promise.all(
      urls.map((u, i) => {
        const a = this.#asked.get(u);
        return a !== undefined && Date.now() - a.atMs < this.#refreshUnknownMs
          ? fresh[i]!
          : this.#ask(u, authorization);
      }),
    );
    found = pick(name, urls, again);
    return found === "unknown" ? null : found;
  }

  async list(
    workers: readonly ModelSource[],
    authorization: string | null,
  ): Promise<{ object: "list"; data: ModelEntry[] }> {
    const ids = new Set<string>();
    const ask = new Map<string, string | null>();
    for (const w of workers) {
      if (w.model !== null) ids.add(w.model);
      if (!ask.has(w.url) || w.model === null) ask.set(w.url, w.model);
    }
    const urls = [...ask.keys()];
    const answers = await Promise.all(urls.map((u) => this.#cached(u, authorization)));
    answers.forEach((cards, i) => {
      const declared = ask.get(urls[i]!) ?? null;
      for (const c of cards) {
        // A declared worker adds its adapters (cards whose parent is its model).
        if (declared === null || (c.parent !== null && c.parent === declared)) ids.add(c.id);
      }
    });
    return {
      object: "list",
      data: [...ids].sort().map((id) => ({
        id,
        object: "model",
        created: this.#created,
        owned_by: "kvrouter",
      })),
    };
  }

  /** A worker's cards, from an answer up to `ttlMs` old, else asked now. */
  #cached(url: string, authorization: string | null): Promise<readonly Card[]> {
    const a = this.#asked.get(url);
    if (a !== undefined && Date.now() - a.atMs < this.#ttlMs) return Promise.resolve(a.cards);
    return this.#ask(url, authorization);
  }

  /** Ask a worker now (one request per worker at a time); its last cards if it fails. */
  #ask(url: string, authorization: string | null): Promise<readonly Card[]> {
    let p = this.#asking.get(url);
    if (p === undefined) {
      p = this.#fetch(url, authorization).finally(() => this.#asking.delete(url));
      this.#asking.set(url, p);
    }
    return p;
  }

  async #fetch(url: string, authorization: string | null): Promise<readonly Card[]> {
    try {
      const res = await request(`${url.replace(/\/$/, "")}/v1/models`, {
        dispatcher: this.#agent,
        headers: authorization === null ? {} : { authorization },
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
      if (res.statusCode !== 200) {
        // A 503 while loading, or a 401 for a client's own forwarded key, says nothing
        // about what the worker serves: keep the last answer rather than forget adapters.
        await res.body.dump();
        return this.#asked.get(url)?.cards ?? [];
      }
      const body = (await res.body.json()) as { data?: { id?: unknown; parent?: unknown }[] };
      if (!Array.isArray(body.data)) return this.#asked.get(url)?.cards ?? [];
      const cards: Card[] = [];
      for (const m of body.data) {
        if (typeof m?.id !== "string") continue;
        cards.push({ id: m.id, parent: typeof m.parent === "string" ? m.parent : null });
      }
      this.#asked.set(url, { atMs: Date.now(), cards });
      return cards;
    } catch {
      return this.#asked.get(url)?.cards ?? [];
    }
  }
}

function pick(
  name: string,
  urls: readonly string[],
  answers: readonly (readonly Card[])[],
): AdapterTarget | null | "unknown" {
  let parent: string | null = null;
  let base = false;
  const serving = new Set<string>();
  for (let i = 0; i < urls.length; i++) {
    const card = answers[i]!.find((c) => c.id === name);
    if (card === undefined) continue;
    if (card.parent === null) {
      base = true;
      continue;
    }
    parent ??= card.parent;
    if (card.parent === parent) serving.add(urls[i]!);
  }
  if (parent !== null) return { parent, urls: serving };
  // A base model a worker lists is no adapter: no need to ask again.
  return base ? null : "unknown";
}
