/**
 * Processes that stop: `npm start` (router + four simulated workers) and a simulated worker
 * started in the background through `npm run kvrouter`, each stopped by one signal to the
 * top pid only — what `kill $!` or a supervisor does, not a terminal's Ctrl-C to the whole
 * process group. Afterwards no process of the tree may remain and every port it listened
 * on must refuse connections. SIGKILL and SIGHUP reach npm but are not passed on by it, so
 * those cases check that every kvrouter process notices its parent is gone.
 *
 * Linux only: the process tree is read from /proc.
 */

import { type ChildProcess, spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { connect } from "node:net";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
/** Bounds a hang on a shared machine; not a timing assertion. */
const START_LIMIT_MS = 60_000;
const STOP_LIMIT_MS = 20_000;

/** pid → parent pid of every process on the machine. */
function parentTable(): Map<number, number> {
  const table = new Map<number, number>();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      table.set(Number(name), Number(fields[1]));
    } catch {
      // exited while we were reading
    }
  }
  return table;
}

/** Every process below `root`, with its command line. */
function descendants(root: number): { pid: number; cmd: string }[] {
  const table = parentTable();
  const found: number[] = [];
  const queue = [root];
  while (queue.length > 0) {
    const pid = queue.shift()!;
    for (const [child, parent] of table) {
      if (parent === pid) {
        found.push(child);
        queue.push(child);
      }
    }
  }
  return found.map((pid) => ({ pid, cmd: cmdline(pid) ?? "?" }));
}

function cmdline(pid: number): string | null {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ").trim();
  } catch {
    return null;
  }
}

/** Alive and not a zombie, and still the same program (a reused pid does not count). */
function stillRunning(p: { pid: number; cmd: string }): boolean {
  try {
    const stat = readFileSync(`/proc/${p.pid}/stat`, "utf8");
    const state = stat.slice(stat.lastIndexOf(")") + 2)[0];
    return state !== "Z" && cmdline(p.pid) === p.cmd;
  } catch {
    return false;
  }
}

/** Resolves true when a TCP connection to `port` on loopback is refused. */
function refused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(false);
    });
    socket.once("error", (err: NodeJS.ErrnoException) => resolve(err.code === "ECONNREFUSED"));
  });
}

const started: ChildProcess[] = [];
/** Every tree seen, so a failed test does not leave it behind for the next one. */
const seen: { pid: number; cmd: string }[] = [];
afterEach(() => {
  const procs = started.splice(0);
  for (const c of procs) if (c.pid !== undefined) seen.push(...descendants(c.pid));
  for (const p of seen.splice(0).filter(stillRunning)) process.kill(p.pid, "SIGKILL");
  for (const c of procs) c.kill("SIGKILL");
});

/** `npm <args>` with stdout collected; resolves once `ready` matches the output so far. */
function npm(args: string[], ready: RegExp): Promise<{ proc: ChildProcess; out: () => string }> {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith("KVROUTER_")),
  );
  const proc = spawn("npm", args, { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
  started.push(proc);
  let text = "";
  proc.stdout!.on("data", (d: Buffer) => {
    text += d.toString();
  });
  proc.stderr!.on("data", (d: Buffer) => {
    text += d.toString();
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`not ready:\n${text}`)), START_LIMIT_MS);
    const check = () => {
      if (ready.test(text)) {
        clearTimeout(timer);
        proc.stdout!.off("data", check);
        resolve({ proc, out: () => text });
      }
    };
    proc.stdout!.on("data", check);
    proc.once("exit", (code) => reject(new Error(`npm exited (${code}) early:\n${text}`)));
  });
}

const portsIn = (text: string): number[] => [
  ...new Set([...text.matchAll(/(?:http|tcp):\/\/127\.0\.0\.1:(\d+)/g)].map((m) => Number(m[1]))),
];

/** Signal the top pid only, then wait until the whole tree and its ports are gone. */
async function stopAndCheck(proc: ChildProcess, signal: NodeJS.Signals, ports: number[]) {
  const tree = descendants(proc.pid!);
  seen.push(...tree);
  const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()));
  process.kill(proc.pid!, signal);
  await exited;
  const deadline = Date.now() + STOP_LIMIT_MS;
  let left = tree.filter(stillRunning);
  while (left.length > 0 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
    left = left.filter(stillRunning);
  }
  expect(left.map((p) => `${p.pid} ${p.cmd}`)).toEqual([]);
  const open = [];
  for (const port of ports) if (!(await refused(port))) open.push(port);
  expect(open).toEqual([]);
  return tree;
}

describe.skipIf(process.platform !== "linux")(
  "every process ends with the one that started it",
  () => {
    // The README's `npm start` as it is for SIGTERM; with one worker for the other two
    // signals (the same process tree, one level deep, at a quarter of the start-up work).
    it.each([
      ["SIGTERM", 4],
      ["SIGINT", 1],
      ["SIGKILL", 1],
    ] as const)(
      "npm start, %s to the npm process: router and %i worker(s) gone, ports free",
      async (signal, workers) => {
        const args = workers === 4 ? ["start"] : ["start", "--", "--workers", String(workers)];
        const { proc, out } = await npm(args, /Ctrl-C stops everything/);
        const ports = portsIn(out());
        expect(ports.length).toBe(1 + workers); // the router and its workers
        const tree = await stopAndCheck(proc, signal, ports);
        // The tree that was checked is the real one: the router and the workers.
        expect(tree.filter((p) => / serve /.test(p.cmd)).length).toBe(1);
        expect(tree.filter((p) => / sim-worker /.test(p.cmd)).length).toBe(workers);
      },
      START_LIMIT_MS + STOP_LIMIT_MS + 10_000,
    );

    it.each(["SIGTERM", "SIGHUP"] as const)(
      "a background sim-worker (npm run kvrouter -- sim-worker … &), %s to $!: gone, ports free",
      async (signal) => {
        const args = ["--port", "0", "--events-port", "0", "--replay-port", "0"];
        const { proc, out } = await npm(
          ["run", "--silent", "kvrouter", "--", "sim-worker", ...args],
          /sim-worker listening/,
        );
        const ports = portsIn(out());
        expect(ports.length).toBe(3); // HTTP, events, replay
        const tree = await stopAndCheck(proc, signal, ports);
        expect(tree.filter((p) => / sim-worker /.test(p.cmd)).length).toBe(1);
      },
      START_LIMIT_MS + STOP_LIMIT_MS + 10_000,
    );
  },
);
