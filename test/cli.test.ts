/**
 * The `kvrouter` command's small promises: `--version` prints the package's version, and
 * `serve --check` shows the unknown-`KVROUTER_*` warning (with a suggestion) as a start
 * would, before printing the effective configuration.
 */

import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

function kvrouter(args: string[], env: Record<string, string> = {}) {
  const clean = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith("KVROUTER_")),
  );
  return spawnSync(process.execPath, ["--import", "tsx", "src/cli.ts", ...args], {
    env: { ...clean, ...env },
    encoding: "utf8",
    timeout: 30_000,
  });
}

describe("kvrouter", () => {
  it("--version prints the package version", () => {
    const pkg = JSON.parse(readFileSync("package.json", "utf8")) as { version: string };
    const r = kvrouter(["--version"]);
    expect(r.status).toBe(0);
    expect(r.stdout).toBe(`kvrouter ${pkg.version}\n`);
  });

  it("serve --check warns about an unknown KVROUTER_ variable, naming the likely one", () => {
    const r = kvrouter(["serve", "--check"], { KVROUTER_SERVR_PORT: "9000" });
    expect(r.status).toBe(0);
    expect(r.stderr).toContain(
      "ignoring unknown environment variable KVROUTER_SERVR_PORT; did you mean KVROUTER_SERVER_PORT?",
    );
    expect(r.stdout).toContain("# effective configuration");
  });
});
