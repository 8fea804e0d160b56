/**
 * `sim-worker --tokenizer DIR`: the gateway's `LocalTokenizer` adapted to what the simulated
 * worker needs (completion and chat ids, decoding, word ids for the text generator), so the
 * simulator tokenizes exactly as the engine whose model files it is given.
 */

import { type ChatRequestLike, loadModelTokenizer, TokenizeError } from "../tokenize/index.js";
import type { SimRealTokenizer } from "./http-app.js";
import { SimHttpError } from "./openai-request.js";

export interface LoadedRealTokenizer extends SimRealTokenizer {
  /** The first id of a word (the text generator's vocabulary). */
  idOf(word: string): number;
  close(): Promise<void>;
}

function asHttp(err: unknown): unknown {
  return err instanceof TokenizeError && err.code === "bad_request"
    ? new SimHttpError(400, err.message)
    : err;
}

export async function loadRealTokenizer(dir: string): Promise<LoadedRealTokenizer> {
  // The simulator encodes on its own thread: no worker pool.
  const tok = await loadModelTokenizer(dir, { threads: 0 });
  return {
    completion: (text) => tok.encodeCompletionSync(text),
    chat(body) {
      try {
        return tok.encodeChatSync(body as ChatRequestLike);
      } catch (err) {
        throw asHttp(err);
      }
    },
    decode: (ids) => tok.decode(ids),
    idOf: (word) => tok.encodeSync(word)[0] ?? 0,
    close: () => tok.close(),
  };
}
