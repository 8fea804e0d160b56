/**
 * `GET /v1/models`: the union of the models the fleet serves, in OpenAI's list shape.
 * A worker declared with a model contributes it; a worker declared without one is asked
 * (its own `GET /v1/models`, short timeout, answers cached for `ttlMs`). A worker that
 * does not answer contributes nothing this time.
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

export class ModelCatalog {
  readonly #agent: Agent;
  readonly #ttlMs: number;
  readonly #timeoutMs: number;
  readonly #asked = new Map<string, { atMs: number; ids: readonly string[] }>();
  readonly #created = Math.floor(Date.now() / 1000);

  constructor(agent: Agent, opts: { ttlMs?: number; timeoutMs?: number } = {}) {
    this.#agent = agent;
    this.#ttlMs = opts.ttlMs ?? 10_000;
    this.#timeoutMs = opts.timeoutMs ?? 1000;
  }

  async list(
    workers: readonly ModelSource[],
    authorization: string | null,
  ): Promise<{ object: "list"; data: ModelEntry[] }> {
    const ids = new Set<string>();
    const ask: string[] = [];
    for (const w of workers) {
      if (w.model !== null) ids.add(w.model);
      else if (!ask.includes(w.url)) ask.push(w.url);
    }
    const answers = await Promise.all(ask.map((u) => this.#ask(u, authorization)));
    for (const list of answers) for (const id of list) ids.add(id);
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

  async #ask(url: string, authorization: string | null): Promise<readonly string[]> {
    const cached = this.#asked.get(url);
    if (cached !== undefined && Date.now() - cached.atMs < this.#ttlMs) return cached.ids;
    try {
      const res = await request(`${url.replace(/\/$/, "")}/v1/models`, {
        dispatcher: this.#agent,
        headers: authorization === null ? {} : { authorization },
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
      const body = (await res.body.json()) as { data?: { id?: unknown }[] };
      const ids =
        res.statusCode === 200 && Array.isArray(body.data)
          ? body.data.map((m) => m.id).filter((id): id is string => typeof id === "string")
          : [];
      this.#asked.set(url, { atMs: Date.now(), ids });
      return ids;
    } catch {
      return cached?.ids ?? [];
    }
  }
}
