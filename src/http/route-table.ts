/**
 * Which methods a path has, so a known path called with another method answers 405 with
 * an `Allow` header (RFC 9110 §15.5.6) instead of a 404 that suggests the path is wrong.
 * Fastify's router has no such notion: this records every route as it is registered
 * (`onRoute`) and matches a path against the patterns only when a request found no route.
 */

import type { FastifyInstance } from "fastify";

interface Pattern {
  readonly regex: RegExp;
  readonly methods: Set<string>;
}

/** Methods registered per route pattern; `allowed(path)` lists those matching a path. */
export class RouteTable {
  readonly #patterns = new Map<string, Pattern>();

  add(url: string, methods: string | readonly string[]): void {
    let p = this.#patterns.get(url);
    if (p === undefined) {
      p = { regex: patternRegex(url), methods: new Set() };
      this.#patterns.set(url, p);
    }
    for (const m of typeof methods === "string" ? [methods] : methods) p.methods.add(m);
  }

  /** Methods of every pattern matching `path` (no query string), sorted; empty = unknown path. */
  allowed(path: string): string[] {
    const out = new Set<string>();
    for (const p of this.#patterns.values()) {
      if (p.regex.test(path)) for (const m of p.methods) out.add(m);
    }
    return [...out].sort();
  }
}

/** `/v1/workers/:id/load` → `^/v1/workers/[^/]+/load$`, as fastify matches it (no trailing slash). */
function patternRegex(url: string): RegExp {
  const parts = url.split("/").map((seg) => {
    if (seg.startsWith(":")) return "[^/]+";
    if (seg === "*") return ".*";
    return seg.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  });
  return new RegExp(`^${parts.join("/")}$`);
}

/** Record every route registered on `app` from now on. Call before registering routes. */
export function trackRoutes(app: FastifyInstance): RouteTable {
  const table = new RouteTable();
  app.addHook("onRoute", (route) => table.add(route.url, route.method));
  return table;
}
