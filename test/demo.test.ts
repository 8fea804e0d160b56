/**
 * `kvrouter demo` as a real process tree (router + simulated workers on loopback): the
 * quick run ends by itself with exit 0, the kv-aware policy gets a higher prefix hit rate
 * than round-robin on the same workload, every request is accounted for, and no process
 * the demo started survives it — neither after a normal run nor after SIGTERM mid-run.
 */

import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { describe, expect, it } from "vitest";

/** Generous: the machine is shared; this bounds a hang, it is not a timing assertion. */
const RUN_LIMIT_MS = 90_000;

function demo(args: string[]): ChildProcess {
  // The demo is the direct child (no tsx wrapper), so its own children are the ones it reports.
  return spawn(process.execPath, ["--import", "tsx", "src/cli.ts", "demo", ...args], {
    cwd: process.cwd(),
    env: Object.fromEntries(
      Object.entries(process.env).filter(([k]) => !k.startsWith("KVROUTER_")),
    ),
    stdio: ["ignore", "pipe", "pipe"],
  });
}

interface Finished {
  readonly code: number | null;
  readonly stdout: string[];
  readonly stderr: string[];
}

/** Collect output until exit; SIGKILL the demo if it outlives `RUN_LIMIT_MS`. */
function finished(child: ChildProcess, onStderr: (line: string) => void = () => {}) {
  const stdout: string[] = [];
  const stderr: string[] = [];
  createInterface({ input: child.stdout! }).on("line", (l) => stdout.push(l));
  createInterface({ input: child.stderr! }).on("line", (l) => {
    stderr.push(l);
    onStderr(l);
  });
  return new Promise<Finished>((resolve) => {
    const timer = setTimeout(() => child.kill("SIGKILL"), RUN_LIMIT_MS);
    child.once("exit", (code) => {
      clearTimeout(timer);
      // Let readline deliver the last lines.
      setImmediate(() => resolve({ code, stdout, stderr }));
    });
  });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

interface PolicyFigures {
  readonly requests: number;
  readonly errors: number;
  readonly hitRate: number;
  readonly ttftMeanMs: number;
  readonly requestsPerWorker: Record<string, number>;
}

interface DemoJson {
  readonly workers: number;
  readonly requests: number;
  readonly pids: { router: number; workers: number[] };
  readonly kv: PolicyFigures;
  readonly roundRobin: PolicyFigures;
}

describe("kvrouter demo", () => {
  it(
    "--quick --json: exits 0, kv-aware beats round-robin on hit rate, leaves no process",
    async () => {
      const run = await finished(demo(["--quick", "--json", "--seed", "7"]));
      const context = `stderr:\n${run.stderr.join("\n")}`;
      expect(run.code, context).toBe(0);
      const out = JSON.parse(run.stdout.at(-1) ?? "") as DemoJson;

      expect(out.workers).toBe(4);
      expect(out.pids.workers).toHaveLength(4);
      for (const p of [out.kv, out.roundRobin]) {
        expect(p.errors).toBe(0);
        expect(p.requests).toBe(out.requests);
        expect(Object.keys(p.requestsPerWorker)).toHaveLength(4);
        expect(Object.values(p.requestsPerWorker).reduce((a, b) => a + b, 0)).toBe(out.requests);
        expect(p.ttftMeanMs).toBeGreaterThan(0);
      }
      // Round-robin deals the requests out evenly.
      for (const n of Object.values(out.roundRobin.requestsPerWorker)) {
        expect(Math.abs(n - out.requests / 4)).toBeLessThanOrEqual(1);
      }
      // Follow-up turns find their conversation on the worker the router chose: ~17 points
      // better here; a router that ignores the cache (prefill weight 0) ties round-robin.
      expect(out.kv.hitRate).toBeGreaterThan(out.roundRobin.hitRate + 0.05);

      for (const pid of [out.pids.router, ...out.pids.workers]) {
        expect(alive(pid), `pid ${pid} still running`).toBe(false);
      }
    },
    RUN_LIMIT_MS + 10_000,
  );

  it(
    "SIGTERM mid-run: stops the router and every worker, exits 143",
    async () => {
      // Two workers: the same tree to stop, with half the start-up work of the default four.
      const child = demo(["--quick", "--workers", "2"]);
      let pids: number[] = [];
      const run = await finished(child, (line) => {
        // "demo: router http://… (pid R), workers pids A, B": the fleet is up.
        const m = /\(pid (\d+)\), workers pids ([\d, ]+)$/.exec(line);
        if (m === null) return;
        pids = [Number(m[1]), ...m[2]!.split(", ").map(Number)];
        child.kill("SIGTERM");
      });
      expect(pids, `stderr:\n${run.stderr.join("\n")}`).toHaveLength(3);
      expect(run.code).toBe(143);
      for (const pid of pids) expect(alive(pid), `pid ${pid} still running`).toBe(false);
    },
    RUN_LIMIT_MS + 10_000,
  );

  it(
    "--stay (npm start): the router answers with every worker ready; SIGINT stops all, exit 0",
    async () => {
      const child = demo(["--stay", "--workers", "2"]);
      const pids: number[] = [];
      let ready: Promise<{ status: number; workers: number; routed: string }> | null = null;
      const stdoutLines: string[] = [];
      createInterface({ input: child.stdout! }).on("line", (line) => {
        stdoutLines.push(line);
        const m = /^\s+(router|sim-\d+)\s+(http:\S+)\s+\(pid (\d+)\)$/.exec(line);
        if (m !== null) pids.push(Number(m[3]));
        if (m?.[1] === "router") {
          const url = m[2]!;
          ready = (async () => {
            const readyz = await fetch(`${url}/readyz`);
            const workers = (await (await fetch(`${url}/v1/workers`)).json()) as {
              workers: unknown[];
            };
            const route = (await (
              await fetch(`${url}/v1/route`, {
                method: "POST",
                headers: { "content-type": "application/json" },
                body: JSON.stringify({ token_ids: Array.from({ length: 40 }, (_, i) => i) }),
              })
            ).json()) as { worker: { id: string } };
            return {
              status: readyz.status,
              workers: workers.workers.length,
              routed: route.worker.id,
            };
          })().finally(() => child.kill("SIGINT"));
        }
      });
      const code = await new Promise<number | null>((resolve) => {
        const timer = setTimeout(() => child.kill("SIGKILL"), RUN_LIMIT_MS);
        child.once("exit", (c) => {
          clearTimeout(timer);
          resolve(c);
        });
      });
      expect(ready, stdoutLines.join("\n")).not.toBeNull();
      const seen = await ready!;
      expect(seen.status).toBe(200);
      expect(seen.workers).toBe(2);
      expect(seen.routed).toMatch(/^sim-[01]$/);
      expect(code).toBe(0);
      expect(pids).toHaveLength(3);
      for (const pid of pids) expect(alive(pid), `pid ${pid} still running`).toBe(false);
    },
    RUN_LIMIT_MS + 10_000,
  );
});
