/**
 * The demo's child processes (router, simulated workers): `kvrouter <sub-command>` run with
 * the same Node binary and flags as this process, so it works under tsx from source and
 * from `dist/` alike. The group owns every child it started and stops them all, whatever
 * happens: SIGTERM, then SIGKILL after a grace period, and a last synchronous SIGKILL on
 * process exit. The last lines of each child's output are kept for error messages.
 */

import { type ChildProcess, spawn } from "node:child_process";
import { extname } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const TAIL_LINES = 30;

/** `cli.ts` under tsx, `cli.js` from dist/: the sibling of this module's folder. */
const CLI_PATH = fileURLToPath(
  new URL(`../cli${extname(fileURLToPath(import.meta.url))}`, import.meta.url),
);

/** One child: its pid, a promise of its exit code, and its recent output. */
export interface ManagedChild {
  readonly name: string;
  readonly pid: number;
  /** Resolves when the process has exited (code, or null when killed by a signal). */
  readonly exited: Promise<number | null>;
  /** Resolves with the first JSON line on stdout that satisfies `match`. */
  waitForJsonLine<T>(
    match: (obj: Record<string, unknown>) => T | null,
    timeoutMs: number,
  ): Promise<T>;
  /** Last lines of stdout and stderr, for error messages. */
  tail(): string;
  /** Send a signal (no-op once it has exited). */
  kill(signal: NodeJS.Signals): void;
}

class Child implements ManagedChild {
  readonly exited: Promise<number | null>;
  #alive = true;
  readonly #lines: string[] = [];
  readonly #waiters = new Set<(obj: Record<string, unknown>) => void>();

  constructor(
    readonly name: string,
    readonly proc: ChildProcess,
  ) {
    this.exited = new Promise((resolve) => {
      proc.once("exit", (code) => {
        this.#alive = false;
        resolve(code);
      });
      proc.once("error", () => {
        this.#alive = false;
        resolve(null);
      });
    });
    const keep = (line: string) => {
      this.#lines.push(line);
      if (this.#lines.length > TAIL_LINES) this.#lines.shift();
    };
    createInterface({ input: proc.stdout! }).on("line", (line) => {
      keep(line);
      if (this.#waiters.size === 0 || !line.startsWith("{")) return;
      let obj: unknown;
      try {
        obj = JSON.parse(line);
      } catch {
        return;
      }
      if (typeof obj === "object" && obj !== null) {
        for (const w of [...this.#waiters]) w(obj as Record<string, unknown>);
      }
    });
    createInterface({ input: proc.stderr! }).on("line", keep);
  }

  kill(signal: NodeJS.Signals): void {
    if (this.#alive) this.proc.kill(signal);
  }

  get pid(): number {
    return this.proc.pid ?? -1;
  }

  get alive(): boolean {
    return this.#alive;
  }

  waitForJsonLine<T>(
    match: (obj: Record<string, unknown>) => T | null,
    timeoutMs: number,
  ): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const finish = (fn: () => void) => {
        clearTimeout(timer);
        this.#waiters.delete(waiter);
        fn();
      };
      const waiter = (obj: Record<string, unknown>) => {
        const got = match(obj);
        if (got !== null) finish(() => resolve(got));
      };
      const timer = setTimeout(
        () => finish(() => reject(this.#failure(`did not start within ${timeoutMs} ms`))),
        timeoutMs,
      );
      this.#waiters.add(waiter);
      void this.exited.then((code) =>
        finish(() => reject(this.#failure(`exited (code ${code}) before it was ready`))),
      );
    });
  }

  tail(): string {
    return this.#lines.map((l) => `    ${l}`).join("\n");
  }

  #failure(what: string): Error {
    return new Error(`${this.name} (pid ${this.pid}) ${what}; its last output:\n${this.tail()}`);
  }
}

/** Every child the demo started; `stopAll` is safe to call any number of times. */
export class ChildGroup {
  readonly #children: Child[] = [];
  readonly #onExit = () => this.killAllSync();

  readonly #nodeArgs: readonly string[];

  /**
   * @param nodeArgs Node flags for the children: by default this process's own (so `tsx`
   * carries over); a test runner whose flags differ passes e.g. `["--import", "tsx"]`.
   */
  constructor(nodeArgs: readonly string[] = process.execArgv) {
    this.#nodeArgs = nodeArgs;
    process.on("exit", this.#onExit);
  }

  /** Start `kvrouter <args…>` as a child process. */
  start(name: string, args: readonly string[], env: NodeJS.ProcessEnv = process.env): ManagedChild {
    const proc = spawn(process.execPath, [...this.#nodeArgs, CLI_PATH, ...args], {
      stdio: ["ignore", "pipe", "pipe"],
      env,
    });
    const child = new Child(name, proc); // listens for 'error' before anything can emit it
    if (proc.pid === undefined) throw new Error(`cannot start ${name} (${process.execPath})`);
    this.#children.push(child);
    return child;
  }

  /** Pids of every child started (alive or not). */
  pids(): number[] {
    return this.#children.map((c) => c.pid);
  }

  /** SIGTERM every live child, wait for all to exit, SIGKILL those still alive after `graceMs`. */
  async stopAll(graceMs = 5000): Promise<void> {
    const live = this.#children.filter((c) => c.alive);
    for (const c of live) c.proc.kill("SIGTERM");
    let timer: NodeJS.Timeout | undefined;
    const grace = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, graceMs);
    });
    await Promise.race([Promise.all(live.map((c) => c.exited)), grace]);
    clearTimeout(timer);
    const stuck = live.filter((c) => c.alive);
    for (const c of stuck) c.proc.kill("SIGKILL");
    await Promise.all(stuck.map((c) => c.exited));
    process.off("exit", this.#onExit);
  }

  /** Last resort on process exit: SIGKILL whatever is still running (synchronous). */
  killAllSync(): void {
    for (const c of this.#children) if (c.alive) c.proc.kill("SIGKILL");
  }
}
