/**
 * The `kvrouter` command's small promises: `--version` prints the package's version, and
 * `serve --check` shows the unknown-`KVROUTER_*` warning (with a suggestion) as a start
 * would, before printing the effective configuration; `healthcheck` (the image's
 * HEALTHCHECK) probes the port of the configuration, not a fixed 8080.
 */

import { spawn, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
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

/** `kvrouter healthcheck` without blocking this process (the probed server lives here). */
function healthcheck(env: Record<string, string>): Promise<number | null> {
  const clean = Object.fromEntries(
    Object.entries(process.env).filter(
      ([k]) => !k.startsWith("KVROUTER_") && k !== "HEALTHCHECK_URL",
    ),
  );
  const child = spawn(process.execPath, ["--import", "tsx", "src/cli.ts", "healthcheck"], {
    env: { ...clean, KVROUTER_CONFIG: "config/example.yaml", ...env },
    stdio: "ignore",
  });
  return new Promise((resolve) => child.once("exit", (code) => resolve(code)));
}

describe("kvrouter healthcheck", () => {
  it("probes /healthz on the configured port; fails when nothing answers there", async () => {
    const paths: string[] = [];
    const server = createServer((req, res) => {
      paths.push(req.url ?? "");
      res.writeHead(req.url === "/healthz" || req.url === "/health" ? 200 : 404).end("{}");
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as { port: number };
    try {
      expect(await healthcheck({ KVROUTER_SERVER_PORT: String(port) })).toBe(0);
      expect(
        await healthcheck({
          KVROUTER_SERVER_PORT: String(port),
          KVROUTER_SERVER_HOST: "0.0.0.0",
          // A router on a non-loopback address needs a token (or it refuses to start).
          KVROUTER_SERVER_AUTH_TOKEN: "t",
        }),
      ).toBe(0);
      expect(await healthcheck({ HEALTHCHECK_URL: `http://127.0.0.1:${port}/health` })).toBe(0);
      expect(paths).toEqual(["/healthz", "/healthz", "/health"]);
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
    expect(await healthcheck({ KVROUTER_SERVER_PORT: String(port) })).toBe(1);
  }, 30_000);
});
