/**
 * Wiring of one simulated worker: engine + KV cache, HTTP app, and the ZeroMQ publisher
 * its cache events go out on. `startSimWorker` is used by `kvrouter sim-worker`, by the
 * demo and by integration tests (ports 0 = OS-assigned; the handle reports real ones).
 */

import type { FastifyInstance } from "fastify";
import { EnginePublisher } from "../engine/publisher.js";
import { SimEngine } from "./engine.js";
import { buildSimApp } from "./http-app.js";
import { SimMetrics } from "./metrics.js";
import { loadRealTokenizer } from "./real-tokenizer.js";
import type { SimWorkerConfig } from "./sim-config.js";
import { TextGenerator } from "./text-generator.js";
import { realClock, type SimClock } from "./timing.js";
import { SimTokenizer } from "./tokenizer.js";
import { toWireBatch } from "./wire-events.js";

export interface SimWorkerHandle {
  readonly config: SimWorkerConfig;
  readonly app: FastifyInstance;
  readonly engine: SimEngine;
  /** `http://host:port` actually listened on. */
  readonly url: string;
  /** ZeroMQ endpoints actually bound (null when disabled). */
  readonly eventsEndpoint: string | null;
  readonly replayEndpoint: string | null;
  readonly publisher: EnginePublisher | null;
  close(): Promise<void>;
}

function tcp(host: string, port: number): string {
  const h = host === "0.0.0.0" || host === "::" ? "*" : host.includes(":") ? `[${host}]` : host;
  return `tcp://${h}:${port === 0 ? "*" : port}`;
}

/** A port another process holds: which port, and the flag that chose it, in one line. */
export class PortInUseError extends Error {}

function inUse(err: unknown, host: string, port: number, flag: string): unknown {
  if ((err as { code?: unknown }).code !== "EADDRINUSE") return err;
  return new PortInUseError(
    `port ${port} (${flag}) on ${host} is already in use; stop the process holding it or choose another port`,
  );
}

/** Start one simulated worker (rank `config.dataParallelRank`): sockets bound, HTTP listening. */
export async function startSimWorker(
  config: SimWorkerConfig,
  clock: SimClock = realClock,
): Promise<SimWorkerHandle> {
  const rank = config.dataParallelRank;
  let publisher: EnginePublisher | null = null;
  if (config.eventsPort !== null) {
    try {
      publisher = await EnginePublisher.bind({
        endpoint: tcp(config.host, config.eventsPort),
        replayEndpoint: config.replayPort === null ? null : tcp(config.host, config.replayPort),
        dataParallelRank: rank,
        topic: config.topic,
        encoding: { eventForm: config.eventForm, hashForm: config.hashForm },
      });
    } catch (err) {
      const address = String((err as { address?: unknown }).address ?? "");
      const port = Number(address.slice(address.lastIndexOf(":") + 1));
      const flag = port === config.eventsPort + rank ? "--events-port" : "--replay-port";
      throw inUse(err, config.host, port, flag);
    }
  }
  const pub = publisher;
  const tokenizer = new SimTokenizer();
  let real: Awaited<ReturnType<typeof loadRealTokenizer>> | null = null;
  try {
    real = config.tokenizerDir === null ? null : await loadRealTokenizer(config.tokenizerDir);
  } catch (err) {
    await publisher?.close();
    throw err;
  }
  const generator = new TextGenerator(real ?? tokenizer);
  const engine = new SimEngine(
    {
      prefillTokensPerSec: config.prefillTokensPerSec,
      prefillOverheadMs: config.prefillOverheadMs,
      decodeMsPerToken: config.decodeMsPerToken,
      maxNumSeqs: config.maxNumSeqs,
      maxModelLen: config.maxModelLen,
    },
    { numBlocks: config.numGpuBlocks, blockSize: config.blockSize, seed: config.seed },
    clock,
    (tokens) => generator.next(tokens),
    (events) => {
      pub?.publish(toWireBatch(events, clock.now() / 1000, rank));
    },
  );
  const metrics = new SimMetrics(config.model, rank, {
    blockSize: config.blockSize,
    numGpuBlocks: config.numGpuBlocks,
  });
  const app = buildSimApp({
    engine,
    tokenizer,
    realTokenizer: real,
    metrics,
    clock,
    modelName: config.model,
    loras: config.loras,
    maxModelLen: config.maxModelLen,
  });
  let address: string;
  try {
    address = await app.listen({
      host: config.host,
      port: config.port === 0 ? 0 : config.port + rank,
    });
  } catch (err) {
    await publisher?.close();
    await real?.close();
    throw inUse(err, config.host, config.port + rank, "--port");
  }
  let closing: Promise<void> | null = null;
  return {
    config,
    app,
    engine,
    url: address,
    eventsEndpoint: publisher?.endpoint ?? null,
    replayEndpoint: publisher?.replayEndpoint ?? null,
    publisher,
    close() {
      closing ??= (async () => {
        engine.close();
        await app.close();
        await publisher?.close();
        await real?.close();
      })();
      return closing;
    },
  };
}
