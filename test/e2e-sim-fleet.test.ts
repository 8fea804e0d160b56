/**
 * End to end with real processes: the router and two simulated vLLM workers as child
 * processes (`kvrouter serve`, `kvrouter sim-worker`), over real ZeroMQ and HTTP.
 * - a prompt whose prefix only worker B holds is routed to B;
 * - after B evicts it (LRU, by serving other prompts), routing follows the new state;
 * - B killed (SIGKILL): it leaves the candidates at once although it holds the prompt;
 * - B restarted on the same ports: the router notices the new engine (its old entries
 *   are dropped) and routes to B again once B caches the prompt.
 */

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ChildGroup } from "../src/demo/child-group.js";
import { type DemoFleet, type DemoWorker, launchFleet, simArgs } from "../src/demo/demo-fleet.js";
import type { SimTiming } from "../src/demo/demo-options.js";

/** Bounds a hang; not a timing assertion. */
const WAIT_MS = 20_000;

// 48 blocks of 16 tokens (47 usable): a 10-block prompt is evicted by ~40 other blocks.
const SIM: SimTiming = {
  prefillTokensPerS: 500_000,
  decodeMsPerToken: 1,
  numGpuBlocks: 48,
  blockSize: 16,
  maxNumSeqs: 4,
};

const tokens = (seed: number, n: number): number[] =>
  Array.from({ length: n }, (_, i) => 1000 + ((seed * 7919 + i * 104729) % 30000));

const PROMPT = tokens(1, 160); // 10 full blocks

// biome-ignore lint/suspicious/noExplicitAny: the test reads a few fields of JSON replies
async function post(url: string, body: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: await res.json() };
}

async function complete(worker: DemoWorker, prompt: number[]): Promise<void> {
  const r = await post(`${worker.url}/v1/completions`, {
    model: "sim-model",
    prompt,
    max_tokens: 1,
  });
  expect(r.status, JSON.stringify(r.json)).toBe(200);
}

/** B's leading GPU overlap of PROMPT, as the router's index sees it. */
async function overlapOf(router: string, id: string): Promise<number> {
  const r = await post(`${router}/v1/match`, { token_ids: PROMPT });
  const w = (r.json.workers as { id: string; overlap_blocks: { gpu: number } }[]).find(
    (x) => x.id === id,
  );
  return w?.overlap_blocks.gpu ?? 0;
}

async function until<T>(what: string, probe: () => Promise<T>, ok: (v: T) => boolean) {
  const deadline = Date.now() + WAIT_MS;
  let last: T | undefined;
  while (Date.now() < deadline) {
    try {
      last = await probe();
      if (ok(last)) return last;
    } catch {
      // the worker may be restarting
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}; last: ${JSON.stringify(last)}`);
}

/** The port of `http://127.0.0.1:P` or `tcp://127.0.0.1:P`. */
const port = (endpoint: string): string => endpoint.slice(endpoint.lastIndexOf(":") + 1);

describe("router + simulated workers as processes", () => {
  const group = new ChildGroup(["--import", "tsx"]);
  let fleet: DemoFleet;

  beforeAll(async () => {
    fleet = await launchFleet(group, 2, SIM, 7);
  }, 60_000);

  afterAll(async () => {
    await group.stopAll();
    await fleet?.cleanup();
  });

  it("routes by B's cache, follows its eviction, and survives B's restart", async () => {
    const router = fleet.routerUrl;
    const b = fleet.workers[1]!;

    // Only B computes the prompt; the router learns it from B's KV events.
    await complete(b, PROMPT);
    await until(
      "B's blocks in the index",
      () => overlapOf(router, b.id),
      (n) => n === 10,
    );
    const routed = await post(`${router}/v1/route`, { token_ids: PROMPT });
    expect(routed.status).toBe(200);
    expect(routed.json.worker.id).toBe(b.id);
    expect(routed.json.overlap_blocks).toBe(10);
    await post(`${router}/v1/requests/${routed.json.request_id}/done`, {});

    // B serves other prompts until LRU eviction takes the prompt's blocks.
    for (let i = 0; i < 3; i++) await complete(b, tokens(100 + i, 400));
    await until(
      "B's eviction in the index",
      () => overlapOf(router, b.id),
      (n) => n < 10,
    );
    const after = await post(`${router}/v1/route`, { token_ids: PROMPT });
    const cb = (
      after.json.candidates as { worker: string; overlap_blocks: { gpu: number } }[]
    ).find((c) => c.worker === `${b.id}#0`);
    expect(cb?.overlap_blocks.gpu).toBe(await overlapOf(router, b.id));
    expect(cb?.overlap_blocks.gpu).toBeLessThan(10);
    await post(`${router}/v1/requests/${after.json.request_id}/done`, {});

    // B holds the prompt again, then dies and comes back empty on the same ports.
    await complete(b, PROMPT);
    await until(
      "B's blocks back",
      () => overlapOf(router, b.id),
      (n) => n === 10,
    );
    process.kill(b.pid, "SIGKILL");
    // Dead: out of the candidates as soon as the router sees its event stream drop or a
    // scrape refused, although it holds the whole prompt (before: ~staleAfterMs of traffic).
    await until(
      "B marked unreachable",
      async () => {
        const r = await fetch(`${router}/v1/workers`);
        const body = (await r.json()) as {
          workers: { id: string; ranks: { load: { unreachable: string | null } }[] }[];
        };
        return body.workers.find((w) => w.id === b.id)?.ranks[0]?.load.unreachable ?? null;
      },
      (reason) => reason !== null,
    );
    for (let i = 0; i < 5; i++) {
      const r = await post(`${router}/v1/route`, { token_ids: PROMPT });
      expect(r.status).toBe(200);
      expect(r.json.worker.id).not.toBe(b.id);
      await post(`${router}/v1/requests/${r.json.request_id}/done`, {});
    }
    const samePorts: Record<string, string> = {
      "--port": port(b.url),
      "--events-port": port(b.events),
      "--replay-port": port(b.replay!),
    };
    const args = simArgs(SIM, 99).map((a, i, all) => samePorts[all[i - 1]!] ?? a);
    const restarted = group.start("sim-1-restarted", args);
    await restarted.waitForJsonLine(
      (o) => (o.msg === "sim-worker listening" ? true : null),
      WAIT_MS,
    );
    // The new engine holds nothing: the router must drop B's old entries.
    await until(
      "B's old entries dropped",
      () => overlapOf(router, b.id),
      (n) => n === 0,
    );
    await complete(b, PROMPT);
    const back = await until(
      "routing to the restarted B",
      () => post(`${router}/v1/route`, { token_ids: PROMPT }),
      (r) => r.status === 200 && r.json.worker.id === b.id && r.json.overlap_blocks === 10,
    );
    expect(back.json.worker.url).toBe(b.url);
  }, 90_000);
});
