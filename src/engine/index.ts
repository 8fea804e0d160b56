/**
 * The package entry point for engines (`import { KvEventPublisher } from "kvrouter/engine"`,
 * package.json `exports`): the one public door of `src/engine/`, as `src/config/index.ts`
 * is of the configuration. Documented in docs/custom-engines.md.
 */

export type {
  WireBatch,
  WireBlockRemoved,
  WireBlockStored,
  WireEvent,
} from "../protocol/event-encoder.js";
export { encodeEventBatch } from "../protocol/event-encoder.js";
export {
  type BlockHash,
  KvEventPublisher,
  type KvEventPublisherOptions,
  type RemovedOptions,
  type StoredOptions,
} from "./kv-publisher.js";
export { EnginePublisher, type EnginePublisherOptions } from "./publisher.js";
