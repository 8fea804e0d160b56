/**
 * `kvrouter serve` as a real process: listens on port 0 from a config file, answers over
 * HTTP, and exits 0 on SIGTERM after closing its sockets; a bad config exits 2 naming
 * every bad key.
 */

import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { afterAll, describe, expect, it } from "vitest";

const TSX = join(process.cwd(), "node_modules", ".bin", "tsx");

function serve(args: string[]): ChildProcess {
  return spawn(TSX, ["src/cli.ts", "serve", ...args], {
    cwd: process.cwd(),
    env: Object.fromEntries(
      Object.entries(process.env).filter(([k]) => !k.startsWith("KVROUTER_")),
    ),
    stdio: ["ignore", "pipe", "pipe"],
  });
}

function exitCode(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => child.once("exit", (code) => resolve(code)));
}

const tempDirs: string[] = [];
afterAll(() => {
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
});

function configFile(text: string): string {
  const dir = mkdtempSync(join(tmpdir(), "kvrouter-serve-"));
  tempDirs.push(dir);
  const file = join(dir, "config.yaml");
  writeFileSync(file, text);
  return file;
}

describe("kvrouter serve", () => {
  it("listens, answers, and shuts down cleanly on SIGTERM", async () => {
    const file = configFile(
      "workers:\n  - id: w0\n    url: http://127.0.0.1:9\n    metricsUrl: null\n    eventsEndpoint: tcp://127.0.0.1:9\n",
    );
    const child = serve([
      "--config",
      file,
      "--port",
      "0",
      "--host",
      "127.0.0.1",
      "--log-level",
      "info",
    ]);
    const exited = exitCode(child);
    const records: Record<string, unknown>[] = [];
    const listening = new Promise<Record<string, unknown>>((resolve, reject) => {
      createInterface({ input: child.stdout! }).on("line", (line) => {
        const record = JSON.parse(line) as Record<string, unknown>;
        records.push(record);
        if (record.msg === "kvrouter listening") resolve(record);
      });
      child.once("exit", (code) => reject(new Error(`exited early with ${code}`)));
    });
    const record = await listening;
    const { port } = record.address as { port: number };
    expect(record.workers).toEqual(["w0"]);
    const health = await fetch(`http://127.0.0.1:${port}/healthz`);
    expect(await health.json()).toEqual({ status: "ok" });
    const route = await fetch(`http://127.0.0.1:${port}/v1/route`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ token_ids: [1, 2, 3] }),
    });
    expect(route.status).toBe(200);
    child.kill("SIGTERM");
    expect(await exited).toBe(0);
    expect(records.map((r) => r.msg)).toEqual(
      expect.arrayContaining(["kvrouter listening", "shutting down", "stopped"]),
    );
  });

  it("refuses to start on a bad config, naming every bad key", async () => {
    const file = configFile("server:\n  port: -1\nlog:\n  level: loud\n");
    const child = serve(["--config", file]);
    let stderr = "";
    child.stderr!.on("data", (chunk) => {
      stderr += String(chunk);
    });
    expect(await exitCode(child)).toBe(2);
    expect(stderr).toContain("server.port: must be an integer in [0, 65535], got -1");
    expect(stderr).toContain(
      'log.level: must be one of fatal, error, warn, info, debug, trace, silent, got "loud"',
    );
  });
});
