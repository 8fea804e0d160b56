/**
 * The tokenization module's one door: the gateway contract, the local (model files) and
 * remote (worker `/tokenize`) implementations, and the bundled real model's directory.
 */

export { bundledQwen3Dir } from "./bundled-model.js";
export type { PoolState } from "./encode-pool.js";
export {
  DEFAULT_LOCAL_TOKENIZER_OPTIONS,
  type EncodeMode,
  LocalTokenizer,
  type LocalTokenizerOptions,
  loadModelTokenizer,
} from "./local-tokenizer.js";
export { loadModelFiles, type ModelFiles } from "./model-files.js";
export {
  DEFAULT_REMOTE_TOKENIZER_OPTIONS,
  RemoteTokenizer,
  type RemoteTokenizerOptions,
} from "./remote-tokenizer.js";
export type { SegmentCacheStats } from "./segment-cache.js";
export {
  type ChatRequestLike,
  chatRequestOf,
  type PromptTokenizer,
  TokenizeError,
  type TokenizeErrorCode,
  type TokenizeResult,
} from "./types.js";
