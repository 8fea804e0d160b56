/**
 * Brings up the demo's processes on loopback with ports chosen by the OS: N simulated
 * workers (each announces its ports on stdout; real Qwen3 tokenization, `--tokenizer`
 * on the bundled files), then the router (its gateway tokenizing with the same files) on a temporary config made
 * of `config/demo.yaml` plus those workers, and waits until the router is ready — every
 * worker's load scraped and every event stream connected — so no decision and no cache
 * event of the workload is lost to start-up.
 */

import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parse as parseYaml, stringify as toYaml } from "yaml";
import { bundledQwen3Dir } from "../tokenize/index.js";
import { deriveSeed } from "../util/rng.js";
import type { ChildGroup } from "./child-group.js";
import type { SimTiming } from "./demo-options.js";

/** The router settings the demo uses; same relative place from `src/` and `dist/`. */
export const DEMO_CONFIG_PATH = fileURLToPath(new URL("../../config/demo.yaml", import.meta.url));

const START_TIMEOUT_MS = 30_000;

export interface DemoWorker {
  readonly id: string;
  readonly url: string;
  readonly pid: number;
  /** ZeroMQ endpoints the worker bound (for a restart on the same ports). */
  readonly events: string;
  readonly replay: string | null;
}

export interface DemoFleet {
  readonly workers: readonly DemoWorker[];
  readonly routerUrl: string;
  readonly routerPid: number;
  /** Remove the temporary config (the processes belong to the group). */
  cleanup(): Promise<void>;
}

/** `kvrouter sim-worker` arguments for the demo's timing, on ports chosen by the OS. */
export function simArgs(sim: SimTiming, seed: number, realTokenizer = true): string[] {
  return [
    "sim-worker",
    ...["--port", "0", "--events-port", "0", "--replay-port", "0", "--topic", "kv-events"],
    ...["--num-gpu-blocks", String(sim.numGpuBlocks), "--block-size", String(sim.blockSize)],
    ...["--prefill-tokens-per-s", String(sim.prefillTokensPerS)],
    ...["--decode-ms-per-token", String(sim.decodeMsPerToken)],
    ...["--max-num-seqs", String(sim.maxNumSeqs), "--seed", String(seed)],
    // Real token ids: Qwen3's files, the same the gateway tokenizes with.
    ...(realTokenizer ? ["--tokenizer", bundledQwen3Dir()] : []),
  ];
}

/** The environment without KVROUTER_* variables, so the demo's config is the only source. */
function cleanEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith("KVROUTER_")),
  ) as NodeJS.ProcessEnv;
}

const str = (v: unknown): string | null => (typeof v === "string" ? v : null);

/** Start the workers and the router; resolves once the router is ready. */
export async function launchFleet(
  group: ChildGroup,
  count: number,
  sim: SimTiming,
  seed: number,
  /** false: workers use the simulator's stand-in tokenizer (the gateway still Qwen3's). */
  workerTokenizer = true,
  /** Node options for the router process alone (benchmarks compare V8 settings). */
  routerNodeOptions?: string,
): Promise<DemoFleet> {
  const tmp = await mkdtemp(join(tmpdir(), "kvrouter-demo-"));
  const cleanup = () => rm(tmp, { recursive: true, force: true });
  try {
    const started = Array.from({ length: count }, (_, i) => {
      const id = `sim-${i}`;
      const child = group.start(
        id,
        simArgs(sim, deriveSeed(seed, id), workerTokenizer),
        cleanEnv(),
      );
      return child
        .waitForJsonLine((o) => {
          if (o.msg !== "sim-worker listening") return null;
          const url = str(o.url);
          const events = str(o.events);
          const replay = str(o.replay);
          return url === null || events === null ? null : { id, url, events, replay, child };
        }, START_TIMEOUT_MS)
        .then((w) => ({ ...w, pid: child.pid }));
    });
    const workers = await Promise.all(started);

    const router = await startRouter(group, tmp, workers, sim.blockSize, {}, routerNodeOptions);
    return {
      workers: workers.map((w) => ({
        id: w.id,
        url: w.url,
        pid: w.pid,
        events: w.events,
        replay: w.replay,
      })),
      routerUrl: router.url,
      routerPid: router.pid,
      cleanup,
    };
  } catch (err) {
    await cleanup();
    throw err;
  }
}

/** A worker the router is configured with (`sim-model`, topic `kv-events`). */
export interface FleetWorkerEndpoints {
  readonly id: string;
  readonly url: string;
  readonly events: string;
  readonly replay: string | null;
}

/**
 * `kvrouter serve` on `config/demo.yaml` plus `workers` (config written into `dir`), its
 * gateway tokenizing with the bundled Qwen3 files; resolves once the router is ready.
 */
export async function startRouter(
  group: ChildGroup,
  dir: string,
  workers: readonly FleetWorkerEndpoints[],
  blockSize: number,
  /** `gateway` settings over the demo's (benchmarks compare variants). */
  gatewayOverrides: Readonly<Record<string, unknown>> = {},
  /**
   * Node options for the router alone (benchmarks compare V8 settings, e.g. the young
   * generation's size); the workers and the calling process keep theirs.
   */
  nodeOptions?: string,
): Promise<{ url: string; pid: number }> {
  const count = workers.length;
  const base = parseYaml(await readFile(DEMO_CONFIG_PATH, "utf8")) as Record<string, unknown>;
  const gateway = (base.gateway ?? {}) as Record<string, unknown>;
  const config = {
    ...base,
    gateway: { ...gateway, tokenizers: `sim-model=${bundledQwen3Dir()}`, ...gatewayOverrides },
    workers: workers.map((w) => ({
      id: w.id,
      url: w.url,
      eventsEndpoint: w.events,
      replayEndpoint: w.replay,
      topic: "kv-events",
      model: "sim-model",
      blockSize: blockSize,
    })),
  };
  const configPath = join(dir, "router.yaml");
  await writeFile(configPath, toYaml(config));
  const env = cleanEnv();
  if (nodeOptions !== undefined) {
    env.NODE_OPTIONS = `${env.NODE_OPTIONS ?? ""} ${nodeOptions}`.trim();
  }
  const router = group.start("router", ["serve", "--config", configPath], env);
  const port = await router.waitForJsonLine((o) => {
    if (o.msg !== "kvrouter listening") return null;
    const address = o.address as { port?: unknown } | null;
    return typeof address?.port === "number" ? address.port : null;
  }, START_TIMEOUT_MS);
  const routerUrl = `http://127.0.0.1:${port}`;
  await waitUntilReady(routerUrl, count, () => router.tail());
  return { url: routerUrl, pid: router.pid };
}

interface WorkersBody {
  readonly workers?: readonly { ranks?: readonly { stream?: { connected?: boolean } | null }[] }[];
}

/** Poll until `/readyz` counts every worker fresh and every event stream is connected. */
async function waitUntilReady(url: string, count: number, tail: () => string): Promise<void> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  let last = "no answer yet";
  while (Date.now() < deadline) {
    try {
      const ready = await fetch(`${url}/readyz`);
      const body = (await ready.json()) as { fresh_workers?: number };
      last = `/readyz ${ready.status} ${JSON.stringify(body)}`;
      if (ready.ok && body.fresh_workers === count) {
        const list = (await (await fetch(`${url}/v1/workers`)).json()) as WorkersBody;
        const ranks = (list.workers ?? []).flatMap((w) => w.ranks ?? []);
        const connected = ranks.filter((r) => r.stream?.connected === true).length;
        last = `${connected} of ${count} event streams connected`;
        if (connected === count) return;
      }
    } catch (err) {
      last = String(err);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(
    `the router at ${url} was not ready within ${START_TIMEOUT_MS} ms (${last}); its last output:\n${tail()}`,
  );
}
