/**
 * The parent's side of `ingest-publisher.ts`: fork it with a workload and wait for its
 * IPC messages. Shared by the ingest and stall benchmarks.
 */

import { type ChildProcess, fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { WorkloadOptions } from "./ingest-workload.js";

/** What the publisher child tells its parent. */
export type PublisherMessage =
  | { type: "ready"; endpoint: string; replayEndpoint: string; batches: number; blocks: number }
  | { type: "done"; lastSeq: string; sendMs: number; stats: Record<string, number> };

/** Fork the publisher child for `workload` (its IPC channel open, output inherited). */
export function forkPublisher(workload: Partial<WorkloadOptions>): ChildProcess {
  const script = fileURLToPath(new URL("./ingest-publisher.ts", import.meta.url));
  return fork(script, [JSON.stringify(workload)], {
    execArgv: ["--import", "tsx"],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
}

/** The child's next message of `type`; rejects if it exits first. */
export function nextMessage<T extends PublisherMessage["type"]>(
  child: ChildProcess,
  type: T,
): Promise<Extract<PublisherMessage, { type: T }>> {
  return new Promise((resolve, reject) => {
    const onMessage = (msg: PublisherMessage) => {
      if (msg.type !== type) return;
      child.off("message", onMessage);
      child.off("exit", onExit);
      resolve(msg as Extract<PublisherMessage, { type: T }>);
    };
    const onExit = (code: number | null) => reject(new Error(`publisher exited (${code})`));
    child.on("message", onMessage);
    child.once("exit", onExit);
  });
}
