/**
 * The docs stand alone: no README, doc, example config or compose file may point outside
 * the repository (`../shared`, `/work/…`), and every repository path they name in
 * backticks (`src/…`, `docs/…`, `config/…`, `traces/…`, `test/…`, `bench/…`) or link to
 * (`[x](file.md)`) must exist — except a path `.gitignore` names, which a page tells the
 * reader how to create (the full Mooncake trace).
 */

import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

/** What a new user reads: markdown pages and the example files they copy. */
function pages(): string[] {
  const inDir = (dir: string, ext: RegExp) =>
    readdirSync(join(ROOT, dir))
      .filter((f) => ext.test(f))
      .map((f) => join(dir, f));
  return [
    "README.md",
    "Dockerfile",
    "docker-compose.yml",
    ...inDir("docs", /\.md$/),
    ...inDir("traces", /\.md$/),
    ...inDir("config", /\.(ya?ml|json)$/),
  ];
}

const ignored = readFileSync(join(ROOT, ".gitignore"), "utf8")
  .split("\n")
  .map((l) => l.trim())
  .filter((l) => l !== "" && !l.startsWith("#"));

/** Repository paths named in backticks: `src/x.ts`, `docs/y.md#anchor`, `config/a.yaml:ro`. */
function namedPaths(text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(/`([^`\n]+)`/g)) {
    for (const w of m[1]!.split(/[\s,;()]+/)) {
      const p = /^(?:\.\/)?((?:src|docs|config|traces|test|bench)\/[\w./-]*[\w/])/.exec(w)?.[1];
      if (p !== undefined && !/[*…]/.test(w)) out.push(p);
    }
  }
  return out;
}

/** Relative markdown links `[text](target)`, without anchors; absolute URLs skipped. */
function linkTargets(text: string): string[] {
  return [...text.matchAll(/\]\(([^)\s#]+)(?:#[^)]*)?\)/g)]
    .map((m) => m[1]!)
    .filter((t) => !/^[a-z]+:/.test(t));
}

describe("the docs stand alone", () => {
  const files = pages();

  it("finds the pages and the paths in them (the scan itself works)", () => {
    expect(files).toContain("docs/wire-formats.md");
    expect(namedPaths("see `src/router.ts`, `docs/x.md#a` and `./config/a.yaml:/etc/x`")).toEqual([
      "src/router.ts",
      "docs/x.md",
      "config/a.yaml",
    ]);
  });

  it("nothing points outside the repository", () => {
    const outside = files.flatMap((f) =>
      readFileSync(join(ROOT, f), "utf8")
        .split("\n")
        .map((line, i) => ({ where: `${f}:${i + 1}`, line }))
        .filter(({ line }) => /\.\.\/shared|\/work\/|\.\.\/seeds/.test(line))
        .map(({ where, line }) => `${where}: ${line.trim()}`),
    );
    expect(outside).toEqual([]);
  });

  it("every repository path and relative link named in them exists", () => {
    const missing: string[] = [];
    for (const f of files) {
      const text = readFileSync(join(ROOT, f), "utf8");
      for (const p of namedPaths(text)) {
        if (!existsSync(join(ROOT, p)) && !ignored.includes(p)) missing.push(`${f}: \`${p}\``);
      }
      if (!f.endsWith(".md")) continue;
      for (const t of linkTargets(text)) {
        const target = relative(ROOT, join(ROOT, dirname(f), t));
        if (!existsSync(join(ROOT, target))) missing.push(`${f}: (${t})`);
      }
    }
    expect(missing).toEqual([]);
  });
});
