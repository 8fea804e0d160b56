/**
 * A port already in use is named in one line with the setting that chose it, for the
 * router (`server.port`), a simulated worker's HTTP port and its two ZeroMQ binds — not a
 * stack trace, and nothing else on the output.
 */

import { spawn } from "node:child_process";
import { createServer, type Server } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

let holder: Server;
let port: number;

beforeAll(async () => {
  holder = createServer();
  await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve));
  port = (holder.address() as { port: number }).port;
});
afterAll(() => new Promise<void>((resolve) => holder.close(() => resolve())));

/** Run `kvrouter <args>`; resolves with the exit code and every non-empty output line. */
function run(args: string[]): Promise<{ code: number | null; lines: string[] }> {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith("KVROUTER_")),
  );
  const child = spawn(process.execPath, ["--import", "tsx", "src/cli.ts", ...args], {
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout.on("data", (d: Buffer) => {
    out += d.toString();
  });
  child.stderr.on("data", (d: Buffer) => {
    out += d.toString();
  });
  return new Promise((resolve) =>
    child.once("close", (code) => resolve({ code, lines: out.split("\n").filter(Boolean) })),
  );
}

describe("a port already in use", () => {
  it("kvrouter serve: one line naming the port and server.port", async () => {
    const { code, lines } = await run(["serve", "--port", String(port), "--log-level", "info"]);
    expect(code).toBe(1);
    expect(lines).toHaveLength(1);
    const record = JSON.parse(lines[0]!) as { msg: string; port: number; setting: string };
    expect(record).toMatchObject({ port, setting: "server.port" });
    expect(record.msg).toContain(`port ${port} (server.port) on 127.0.0.1 is already in use`);
  }, 30_000);

  it.each([
    ["--port", ["--port", "P", "--events-port", "0", "--replay-port", "0"]],
    ["--events-port", ["--port", "0", "--events-port", "P", "--replay-port", "0"]],
    ["--replay-port", ["--port", "0", "--events-port", "0", "--replay-port", "P"]],
  ])(
    "kvrouter sim-worker %s: one line naming the port and the flag",
    async (flag, args) => {
      const argv = args.map((a) => (a === "P" ? String(port) : a));
      const { code, lines } = await run(["sim-worker", ...argv]);
      expect(code).toBe(1);
      expect(lines).toEqual([
        `kvrouter sim-worker: port ${port} (${flag}) on 127.0.0.1 is already in use; stop the process holding it or choose another port`,
      ]);
    },
    30_000,
  );
});
