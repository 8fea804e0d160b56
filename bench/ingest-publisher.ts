/**
 * The engine side of the ingest benchmark, run as a child process (`ingest-bench.ts`
 * forks it) so publishing and ingesting do not share an event loop. It pre-encodes the
 * workload, binds an EnginePublisher on loopback and talks to its parent over IPC:
 * `probe` → publish an empty batch (to find out when the subscription is live),
 * `go` → publish the whole workload as fast as the PUB socket takes it, then report.
 */

import { EnginePublisher } from "../src/engine/publisher.js";
import { encodeEventBatch } from "../src/protocol/event-encoder.js";
import { DEFAULT_WORKLOAD, generateWorkload, type WorkloadOptions } from "./ingest-workload.js";

type Command = { cmd: "probe" } | { cmd: "go" } | { cmd: "exit" };

async function main(): Promise<void> {
  if (process.send === undefined) throw new Error("run me through ingest-bench.ts (needs IPC)");
  const send = (msg: unknown) => process.send!(msg);
  const options: WorkloadOptions = { ...DEFAULT_WORKLOAD, ...JSON.parse(process.argv[2] ?? "{}") };
  const workload = generateWorkload(options);
  const pub = await EnginePublisher.bind({
    endpoint: "tcp://127.0.0.1:*",
    replayEndpoint: "tcp://127.0.0.1:*",
    topic: "kv-events",
    // Large enough to replay a whole run: a slow subscriber then shows as gaps+replays.
    bufferSteps: workload.payloads.length + 1000,
    sendHighWaterMark: 1_000_000,
  });
  const empty = encodeEventBatch({ ts: 0, events: [], dpRank: 0 });
  process.on("message", async (msg: Command) => {
    switch (msg.cmd) {
      case "probe":
        pub.publishRaw(empty);
        break;
      case "go": {
        const t0 = performance.now();
        for (const p of workload.payloads) pub.publishRaw(p);
        await pub.flush();
        send({
          type: "done",
          lastSeq: String(pub.nextSeq - 1n),
          sendMs: performance.now() - t0,
          stats: pub.stats,
        });
        break;
      }
      case "exit":
        await pub.close();
        process.disconnect?.();
        break;
    }
  });
  send({
    type: "ready",
    endpoint: pub.endpoint,
    replayEndpoint: pub.replayEndpoint,
    batches: workload.payloads.length,
    blocks: workload.blocks,
  });
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
