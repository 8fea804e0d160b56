/**
 * Worker-thread side of the encode pool: loads the model directory it is given (the same
 * loader as the main thread), then answers `{id, texts}` with `{id, ids}` (one Int32Array per
 * text, transferred) until it is terminated.
 */

import { parentPort, workerData } from "node:worker_threads";
import { HfEncoder } from "./hf-encoder.js";
import { loadModelFiles } from "./model-files.js";

export interface EncodeJob {
  readonly id: number;
  readonly texts: readonly string[];
}
export type EncodeReply =
  | { readonly id: number; readonly ids: Int32Array[] }
  | { readonly id: number; readonly error: string };

const port = parentPort!;
const encoder = new HfEncoder(loadModelFiles((workerData as { dir: string }).dir));
port.postMessage({ ready: true });
port.on("message", (job: EncodeJob) => {
  try {
    const ids = job.texts.map((t) => Int32Array.from(encoder.encode(t)));
    port.postMessage(
      { id: job.id, ids } satisfies EncodeReply,
      ids.map((a) => a.buffer as ArrayBuffer),
    );
  } catch (err) {
    port.postMessage({ id: job.id, error: (err as Error).message } satisfies EncodeReply);
  }
});
