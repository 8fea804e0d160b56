/**
 * examples/custom-engine run as its own process against a real router (HTTP on port 0):
 * over ZeroMQ (the router joins late and replays from seq 0, removals included) and over
 * HTTP (JSON event batches and a ForwardPassMetrics load push). Either way, `/v1/match`
 * must report for every prompt exactly the blocks the toy engine still holds.
 */

import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { startsClosedAfterEach, type TestService } from "./http-harness.js";
import { waitFor } from "./zmq-helpers.js";

const start = startsClosedAfterEach();
const ROOT = fileURLToPath(new URL("..", import.meta.url));
const TOKEN = "t0ken";
const BS = 4;
const ENGINE = ["--block-size", String(BS), "--capacity", "14", "--prompts", "9"];

interface Line {
  readonly ready?: Record<string, string>;
  readonly done?: { prompts: { token_ids: number[]; cached_blocks: number }[] };
}

const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill("SIGTERM");
});

/** Start the example the way its README says (`npm run example:custom-engine`). */
function runExample(args: string[]) {
  const child = spawn(
    process.execPath,
    ["--conditions=kvrouter-source", "--import", "tsx", "examples/custom-engine/main.ts", ...args],
    { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] },
  );
  children.push(child);
  let stderr = "";
  child.stderr!.on("data", (d) => {
    stderr += String(d);
  });
  const lines: Line[] = [];
  createInterface({ input: child.stdout! }).on("line", (l) => lines.push(JSON.parse(l)));
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  const next = async (key: keyof Line) => {
    await waitFor(`example's ${key} line (stderr: ${stderr})`, () =>
      lines.some((l) => l[key] !== undefined),
    );
    return lines.find((l) => l[key] !== undefined)!;
  };
  return { next, exited, stderr: () => stderr };
}

async function router(): Promise<{ s: TestService; base: string }> {
  const s = await start({ index: { blockSize: BS }, server: { authToken: TOKEN } });
  await s.app.listen({ host: "127.0.0.1", port: 0 });
  const a = s.app.server.address();
  if (a === null || typeof a === "string") throw new Error("not listening");
  return { s, base: `http://127.0.0.1:${a.port}` };
}

async function matched(base: string, worker: string, tokenIds: number[]): Promise<number> {
  const res = await fetch(`${base}/v1/match`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ token_ids: tokenIds }),
  });
  const body = (await res.json()) as {
    workers: { worker: string; overlap_blocks: { gpu: number } }[];
  };
  return body.workers.find((w) => w.worker === worker)?.overlap_blocks.gpu ?? 0;
}

async function allMatch(base: string, worker: string, done: NonNullable<Line["done"]>) {
  const got = await Promise.all(done.prompts.map((p) => matched(base, worker, p.token_ids)));
  return got.every((n, i) => n === done.prompts[i]!.cached_blocks);
}

describe("examples/custom-engine", () => {
  it("over ZeroMQ: the router, joining late, matches exactly what the engine holds", async () => {
    const r = await router();
    const ex = runExample([
      "--endpoint",
      "tcp://127.0.0.1:*",
      "--replay",
      "tcp://127.0.0.1:*",
      ...ENGINE,
    ]);
    const { ready } = await ex.next("ready");
    const { done } = await ex.next("done");
    // The workload evicted blocks: some prompts are partly or wholly gone.
    const cached = done!.prompts.map((p) => p.cached_blocks);
    expect(Math.min(...cached)).toBeLessThan(Math.max(...cached));
    expect(Math.max(...cached)).toBeGreaterThan(0);
    const add = await fetch(`${r.base}/v1/workers`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${TOKEN}` },
      body: JSON.stringify({
        id: "toy",
        url: "http://127.0.0.1:1",
        metrics_url: null,
        block_size: BS,
        events_endpoint: ready!.endpoint,
        replay_endpoint: ready!.replay_endpoint,
      }),
    });
    expect(add.status).toBe(201);
    const deadline = Date.now() + 15_000;
    while (!(await allMatch(r.base, "toy#0", done!))) {
      if (Date.now() > deadline) throw new Error("router index never equal to the engine's cache");
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  });

  it("over HTTP: JSON event batches and a ForwardPassMetrics load push", async () => {
    const r = await router();
    const ex = runExample([
      "--router",
      r.base,
      "--token",
      TOKEN,
      "--worker-id",
      "toy-h",
      "--exit",
      ...ENGINE,
    ]);
    expect(await ex.exited, ex.stderr()).toBe(0);
    const { done } = await ex.next("done");
    expect(await allMatch(r.base, "toy-h#0", done!)).toBe(true);
    const w = (await (await fetch(`${r.base}/v1/workers/toy-h`)).json()) as {
      ranks: { load: Record<string, unknown>; stream: Record<string, unknown> }[];
    };
    expect(w.ranks[0]!.load).toMatchObject({ state: "fresh", source: "push", num_gpu_blocks: 14 });
    expect(w.ranks[0]!.stream).toMatchObject({ endpoint: "http", gaps: 0, duplicates: 0 });
  });
});
