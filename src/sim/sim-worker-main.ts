/**
 * `kvrouter sim-worker`: run one simulated vLLM engine until SIGTERM/SIGINT/SIGHUP (or its parent
 * process ends), then close
 * its sockets and exit 0. Options: see `SIM_USAGE` (`--help`).
 */

import { STOP_SIGNALS } from "../lifetime.js";
import { parseSimArgs, SIM_USAGE, SimConfigError } from "./sim-config.js";
import { PortInUseError, startSimWorker } from "./sim-worker.js";

export async function main(argv: string[]): Promise<number> {
  let config: ReturnType<typeof parseSimArgs>;
  try {
    config = parseSimArgs(argv);
  } catch (err) {
    if (!(err instanceof SimConfigError)) throw err;
    process.stderr.write(`kvrouter sim-worker: ${err.message}\n\n${SIM_USAGE}`);
    return 2;
  }
  if (config === "help") {
    process.stdout.write(SIM_USAGE);
    return 0;
  }
  // Handlers go in before anything is announced, and stay until the sockets are closed:
  // a signal at any point after this (even during start-up) means a clean shutdown.
  let stop: () => void = () => {};
  const stopped = new Promise<void>((resolve) => {
    stop = resolve;
  });
  for (const s of STOP_SIGNALS) process.on(s, stop);
  try {
    let worker: Awaited<ReturnType<typeof startSimWorker>>;
    try {
      worker = await startSimWorker(config);
    } catch (err) {
      if (!(err instanceof PortInUseError)) throw err;
      process.stderr.write(`kvrouter sim-worker: ${err.message}\n`);
      return 1;
    }
    process.stdout.write(
      `${JSON.stringify({
        msg: "sim-worker listening",
        model: config.model,
        url: worker.url,
        events: worker.eventsEndpoint,
        replay: worker.replayEndpoint,
        dpRank: config.dataParallelRank,
        numGpuBlocks: config.numGpuBlocks,
        blockSize: config.blockSize,
      })}\n`,
    );
    await stopped;
    await worker.close();
  } finally {
    for (const s of STOP_SIGNALS) process.off(s, stop);
  }
  return 0;
}
