/**
 * A real `redis-server` for tests and benchmarks: started on a free loopback port with
 * persistence off, killed (SIGKILL, like a crash) or stopped at will, restartable on the
 * same port. `redisServerPath()` is null when the binary is absent (developer machines
 * without it skip the tests that need it; CI installs Debian's `redis-server`).
 */

import { type ChildProcess, spawn } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { createServer } from "node:net";

const CANDIDATES = [
  "/usr/bin/redis-server",
  "/usr/local/bin/redis-server",
  "/opt/homebrew/bin/redis-server",
];

export function redisServerPath(): string | null {
  for (const p of CANDIDATES) {
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {}
  }
  return null;
}

export async function freePort(): Promise<number> {
  return await new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      const port = typeof addr === "object" && addr !== null ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

export class RedisProcess {
  #child: ChildProcess | null = null;
  readonly port: number;
  readonly #bin: string;

  private constructor(bin: string, port: number) {
    this.#bin = bin;
    this.port = port;
  }

  /** Start redis-server on a free port (or `port`) and wait until it accepts connections. */
  static async start(port?: number): Promise<RedisProcess> {
    const bin = redisServerPath();
    if (bin === null) throw new Error("redis-server not found");
    const r = new RedisProcess(bin, port ?? (await freePort()));
    await r.restart();
    return r;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** (Re)start on the same port. */
  async restart(): Promise<void> {
    const args = ["--port", String(this.port), "--bind", "127.0.0.1", "--save", ""];
    const child = spawn(this.#bin, [...args, "--appendonly", "no"], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.#child = child;
    await new Promise<void>((resolve, reject) => {
      let out = "";
      const onData = (d: Buffer) => {
        out += String(d);
        if (out.includes("Ready to accept connections")) {
          child.stdout?.off("data", onData);
          child.stdout?.resume();
          resolve();
        }
      };
      child.stdout?.on("data", onData);
      child.once("exit", (code) => reject(new Error(`redis-server exited (${code}): ${out}`)));
    });
  }

  /** SIGKILL: no goodbye to clients, as in a crash. Resolves once the process is gone. */
  async kill(): Promise<void> {
    const child = this.#child;
    this.#child = null;
    if (child === null || child.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      child.once("exit", () => resolve());
      child.kill("SIGKILL");
    });
  }
}
