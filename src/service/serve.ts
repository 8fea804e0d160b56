/**
 * `kvrouter serve`: load and validate the configuration (failing loudly, naming every bad
 * key), build the service, listen, and on SIGTERM/SIGINT/SIGHUP stop accepting, close every
 * socket (HTTP, event subscribers, scrapers) and return 0.
 */

import { stringify as toYaml } from "yaml";
import { formatIssues, loadConfig, redactConfig } from "../config/index.js";
import { STOP_SIGNALS } from "../lifetime.js";
import { createLogger } from "../telemetry/logger.js";
import { createService } from "./service.js";

/** How long a graceful shutdown may take after the drain before giving up with exit code 1. */
const SHUTDOWN_TIMEOUT_MS = 10_000;

function waitForSignal(signals: readonly NodeJS.Signals[]): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const handler = (signal: NodeJS.Signals) => {
      for (const s of signals) process.off(s, handler);
      resolve(signal);
    };
    for (const s of signals) process.on(s, handler);
  });
}

/** Run the router service until a signal; returns the process exit code. */
export async function main(argv: string[]): Promise<number> {
  const outcome = loadConfig({ argv, env: process.env });
  switch (outcome.kind) {
    case "help":
      process.stdout.write(outcome.text);
      return 0;
    case "invalid":
      process.stderr.write(`kvrouter: invalid configuration:\n${formatIssues(outcome.issues)}\n`);
      return 2;
    case "ok":
      break;
  }
  const { config, file } = outcome;
  if (outcome.check) {
    for (const w of outcome.warnings) process.stderr.write(`kvrouter: warning: ${w}\n`);
    process.stdout.write(`# effective configuration (from ${file ?? "defaults"})\n`);
    process.stdout.write(toYaml(redactConfig(config)));
    return 0;
  }
  const logger = createLogger({ level: config.log.level });
  for (const w of outcome.warnings) logger.warn(w);
  let service: Awaited<ReturnType<typeof createService>>;
  try {
    service = await createService(config, { logger });
  } catch (err) {
    logger.fatal({ err }, "cannot start the service");
    return 1;
  }
  const stop = waitForSignal(STOP_SIGNALS);
  try {
    await service.app.listen({ host: config.server.host, port: config.server.port });
  } catch (err) {
    const { host, port } = config.server;
    if ((err as NodeJS.ErrnoException).code === "EADDRINUSE") {
      logger.fatal(
        { host, port, setting: "server.port" },
        `cannot listen: port ${port} (server.port) on ${host} is already in use; stop the process holding it or choose another port`,
      );
    } else logger.fatal({ err, host, port }, "cannot listen");
    await service.close();
    return 1;
  }
  logger.info(
    {
      address: service.app.server.address(),
      configFile: file,
      workers: config.workers.map((w) => w.id),
      authRequired: config.server.authToken !== null,
      decisionAuthRequired: config.server.decisionToken !== null,
    },
    "kvrouter listening",
  );
  const signal = await stop;
  logger.info({ signal }, "shutting down");
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<"timeout">((resolve) => {
    timer = setTimeout(() => resolve("timeout"), config.server.drainMs + SHUTDOWN_TIMEOUT_MS);
  });
  const result = await Promise.race([service.close().then(() => "closed" as const), timeout]);
  clearTimeout(timer);
  if (result === "timeout") {
    logger.error({ timeoutMs: SHUTDOWN_TIMEOUT_MS }, "shutdown timed out");
    return 1;
  }
  logger.info("stopped");
  return 0;
}
