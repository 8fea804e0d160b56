/**
 * Worker-thread side of the encode pool: loads the model directory it is given (the same
 * loader as the main thread) and answers two kinds of job until it is terminated:
 * `{id, texts}` with `{id, ids}` (one Int32Array per text, no special tokens), and
 * `{id, request}` — a whole completion or chat request (or a chat's JSON body, read here)
 * tokenized as the main thread would (chat template, segment cache of this thread, the
 * engine's special tokens) — with
 * `{id, ids: [Int32Array], cached}`. Arrays are transferred, not copied. A failure answers
 * `{id, error, code}` with the `TokenizeError` code.
 */

import { parentPort, workerData } from "node:worker_threads";
import { HfEncoder } from "./hf-encoder.js";
import { LocalTokenizer } from "./local-tokenizer.js";
import { loadModelFiles } from "./model-files.js";
import {
  type ChatRequestLike,
  chatRequestOf,
  TokenizeError,
  type TokenizeErrorCode,
} from "./types.js";

/** A whole request, as `LocalTokenizer` takes it. */
export type RequestJob =
  | { readonly kind: "completion"; readonly prompt: string; readonly special?: boolean }
  | { readonly kind: "chat"; readonly request: ChatRequestLike }
  /** A chat request's JSON body (transferred): read here, so the sender clones no objects. */
  | { readonly kind: "chatBody"; readonly body: Uint8Array };

export type EncodeJob =
  | { readonly id: number; readonly texts: readonly string[] }
  | { readonly id: number; readonly request: RequestJob };
export type EncodeReply =
  | {
      readonly id: number;
      readonly ids: Int32Array[];
      readonly cached?: number;
      /** The job's wall time on this thread (ms): the pool's estimate of queued work. */
      readonly ms?: number;
    }
  | { readonly id: number; readonly error: string; readonly code?: TokenizeErrorCode };

export interface EncodeWorkerData {
  readonly dir: string;
  /** For request jobs: the segment cache bound and mode of the main thread's tokenizer. */
  readonly segmentCacheBytes: number;
  readonly mode: "auto" | "whole";
  /** Whole requests will come: build their tokenizer before saying ready. */
  readonly requests: boolean;
}

const port = parentPort!;
const utf8 = new TextDecoder();

/** The chat fields of a request body the sender has already parsed and checked. */
function chatOfBody(body: Uint8Array): ChatRequestLike {
  const parsed: unknown = JSON.parse(utf8.decode(body));
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw new TokenizeError("bad_request", "the chat body is not a JSON object");
  }
  return chatRequestOf(parsed as Record<string, unknown>);
}
const data = workerData as EncodeWorkerData;
const files = loadModelFiles(data.dir);
const encoder = new HfEncoder(files);
// A pool used only for large texts never pays the segment probe; one that takes whole
// requests pays it before it is ready, not on its first request.
let whole: LocalTokenizer | null = null;
const local = () => {
  whole ??= new LocalTokenizer(files, {
    threads: 0,
    segmentCacheBytes: data.segmentCacheBytes,
    mode: data.mode,
  });
  return whole;
};
if (data.requests) local();
port.postMessage({ ready: true });
port.on("message", (job: EncodeJob) => {
  const t0 = performance.now();
  try {
    if ("texts" in job) {
      const ids = job.texts.map((t) => Int32Array.from(encoder.encode(t)));
      port.postMessage(
        { id: job.id, ids, ms: performance.now() - t0 } satisfies EncodeReply,
        ids.map((a) => a.buffer as ArrayBuffer),
      );
      return;
    }
    const r = job.request;
    let ids: Int32Array;
    let cached: number;
    if (r.kind === "completion") {
      const out = local().tokenizeCompletionSync(r.prompt, r.special ?? true);
      ids = Int32Array.from(out.tokenIds);
      cached = out.cachedSegments ?? 0;
    } else {
      const out = local().tokenizeChatIdsSync(r.kind === "chat" ? r.request : chatOfBody(r.body));
      ids = out.ids;
      cached = out.cachedSegments;
    }
    port.postMessage(
      {
        id: job.id,
        ids: [ids],
        cached,
        ms: performance.now() - t0,
      } satisfies EncodeReply,
      [ids.buffer as ArrayBuffer],
    );
  } catch (err) {
    const code = err instanceof TokenizeError ? err.code : undefined;
    port.postMessage({
      id: job.id,
      error: (err as Error).message,
      ...(code === undefined ? {} : { code }),
    } satisfies EncodeReply);
  }
});
