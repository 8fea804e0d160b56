/**
 * The supported way in for a custom engine that speaks ZeroMQ: `KvEventPublisher` turns
 * "these blocks were stored / removed / everything was cleared" into exactly the bytes
 * vLLM's `ZmqEventPublisher` sends (map-encoded events in an array envelope, uint64
 * hashes, float64 `ts`, the data-parallel rank), with sequence numbers, the replay
 * buffer and the DP rank's port offset handled inside (`EnginePublisher` is the
 * transport). The router subscribes to it like to any vLLM worker
 * (docs/custom-engines.md).
 *
 * Hashes are the engine's own 64-bit block hashes, chained (each folds in its parent),
 * as a `bigint` (signed or unsigned: -1 and 2^64-1 are the same 64 bits, as in vLLM) or
 * a safe-integer `number`. Checks that would corrupt the router's index throw at the
 * call: a token count that is not `hashes × blockSize`, a hash outside 64 bits.
 */

import type { WireBatch, WireBlockStored, WireEvent } from "../protocol/event-encoder.js";
import { EnginePublisher } from "./publisher.js";

/** A block hash as an engine holds it: a 64-bit int, signed or unsigned. */
export type BlockHash = bigint | number;

export interface KvEventPublisherOptions {
  /** Rank 0's PUB bind address, e.g. `tcp://*:5557`; `tcp://127.0.0.1:*` = an OS port. */
  readonly endpoint: string;
  /** Rank 0's replay ROUTER address, e.g. `tcp://*:5558`; null = no replay (not advised). */
  readonly replayEndpoint: string | null;
  /** Tokens per KV block; every stored event carries it. */
  readonly blockSize: number;
  /** Data-parallel rank: both ports are offset by it and batches carry it. Default 0. */
  readonly dataParallelRank?: number;
  /** Default "" (vLLM's default topic). */
  readonly topic?: string;
  /** Batches kept for replay. Default 10,000 (vLLM's `buffer_steps`). */
  readonly bufferSteps?: number;
  /** KV cache group written on each event (vLLM's main group is 0). Default 0. */
  readonly groupIdx?: number;
  /** Seconds since the epoch for each batch's `ts`. Default: the wall clock. */
  readonly clock?: () => number;
}

export interface StoredOptions {
  /** LoRA adapter name; absent/null = base model. Blocks of different adapters never match. */
  readonly loraName?: string | null;
  /** Where the blocks live: "GPU" (default), "CPU", "DISK", … (docs/block-keys.md, tiers). */
  readonly medium?: string | null;
}

export interface RemovedOptions {
  /** The tier the blocks left: "GPU" (default), "CPU", … */
  readonly medium?: string | null;
}

const U64_MIN = -(1n << 63n);
const U64_END = 1n << 64n;

function toHash(h: BlockHash, what: string): bigint {
  if (typeof h === "number") {
    if (!Number.isSafeInteger(h)) {
      throw new RangeError(`${what} ${h} is not a safe integer: pass 64-bit hashes as bigint`);
    }
    return BigInt(h);
  }
  if (typeof h !== "bigint") throw new TypeError(`${what} must be a bigint or an integer`);
  if (h < U64_MIN || h >= U64_END) throw new RangeError(`${what} ${h} does not fit 64 bits`);
  return h;
}

function toHashes(hashes: readonly BlockHash[]): bigint[] {
  if (hashes.length === 0) throw new RangeError("hashes is empty: an event names ≥ 1 block");
  return hashes.map((h, i) => toHash(h, `hashes[${i}]`));
}

/**
 * A custom engine's KV event publisher. One per data-parallel rank; call the `publish*`
 * methods as the engine's block manager stores, evicts or resets, in that order. Each
 * call is one batch (one seq); `publishBatch` sends several events as one.
 */
export class KvEventPublisher {
  readonly #transport: EnginePublisher;
  readonly #blockSize: number;
  readonly #groupIdx: number;
  readonly #clock: () => number;

  private constructor(transport: EnginePublisher, options: KvEventPublisherOptions) {
    this.#transport = transport;
    this.#blockSize = options.blockSize;
    this.#groupIdx = options.groupIdx ?? 0;
    this.#clock = options.clock ?? (() => Date.now() / 1000);
  }

  /** Bind the PUB (and replay) sockets; rank r binds at the base ports + r. */
  static async bind(options: KvEventPublisherOptions): Promise<KvEventPublisher> {
    if (!Number.isInteger(options.blockSize) || options.blockSize < 1) {
      throw new RangeError(`blockSize must be an integer ≥ 1, got ${options.blockSize}`);
    }
    const transport = await EnginePublisher.bind({
      endpoint: options.endpoint,
      replayEndpoint: options.replayEndpoint,
      dataParallelRank: options.dataParallelRank ?? 0,
      topic: options.topic ?? "",
      bufferSteps: options.bufferSteps ?? 10_000,
      encoding: { eventForm: "map", envelopeForm: "array", hashForm: "uint64", engine: "vllm" },
    });
    return new KvEventPublisher(transport, options);
  }

  /** The PUB endpoint actually bound (the OS port filled in). */
  get endpoint(): string {
    return this.#transport.endpoint;
  }

  /** The replay endpoint actually bound, or null. */
  get replayEndpoint(): string | null {
    return this.#transport.replayEndpoint;
  }

  /** The seq the next batch will get (0 for a fresh engine). */
  get nextSeq(): bigint {
    return this.#transport.nextSeq;
  }

  /**
   * Blocks newly cached, in sequence order. `parent` is the hash of the block before the
   * first one (null when the sequence starts at the root); `tokenIds` are all their
   * tokens, `hashes.length × blockSize` of them. Returns the batch's seq.
   */
  publishStored(
    hashes: readonly BlockHash[],
    parent: BlockHash | null,
    tokenIds: ArrayLike<number>,
    options: StoredOptions = {},
  ): bigint {
    return this.publishBatch([this.stored(hashes, parent, tokenIds, options)]);
  }

  /** Blocks evicted from a tier. Returns the batch's seq. */
  publishRemoved(hashes: readonly BlockHash[], options: RemovedOptions = {}): bigint {
    return this.publishBatch([this.removed(hashes, options)]);
  }

  /** The whole prefix cache was reset. Returns the batch's seq. */
  publishCleared(): bigint {
    return this.publishBatch([{ type: "AllBlocksCleared" }]);
  }

  /** A stored event to pass to `publishBatch` (checked now). */
  stored(
    hashes: readonly BlockHash[],
    parent: BlockHash | null,
    tokenIds: ArrayLike<number>,
    options: StoredOptions = {},
  ): WireBlockStored {
    const blockHashes = toHashes(hashes);
    if (tokenIds.length !== blockHashes.length * this.#blockSize) {
      throw new RangeError(
        `tokenIds has ${tokenIds.length} tokens, expected ${blockHashes.length} blocks × ${this.#blockSize}`,
      );
    }
    for (let i = 0; i < tokenIds.length; i++) {
      const t = tokenIds[i]!;
      if (!Number.isInteger(t) || t < 0 || t > 0xffffffff) {
        throw new RangeError(`tokenIds[${i}] is ${t}, not a token id (0..2^32-1)`);
      }
    }
    return {
      type: "BlockStored",
      blockHashes,
      parentHash: parent === null ? null : toHash(parent, "parent"),
      tokenIds,
      blockSize: this.#blockSize,
      loraId: null,
      medium: options.medium ?? "GPU",
      loraName: options.loraName ?? null,
      groupIdx: this.#groupIdx,
    };
  }

  /** A removed event to pass to `publishBatch` (checked now). */
  removed(hashes: readonly BlockHash[], options: RemovedOptions = {}): WireEvent {
    return {
      type: "BlockRemoved",
      blockHashes: toHashes(hashes),
      medium: options.medium ?? "GPU",
      groupIdx: this.#groupIdx,
    };
  }

  /** Several events as one batch (one seq), as vLLM sends one batch per engine step. */
  publishBatch(events: readonly WireEvent[]): bigint {
    const batch: WireBatch = { ts: this.#clock(), events, dpRank: null };
    return this.#transport.publish(batch);
  }

  /** Resolves once every batch published so far has been handed to the socket. */
  flush(): Promise<void> {
    return this.#transport.flush();
  }

  /** Counters: batches sent, send errors, replay requests served. */
  get stats(): {
    readonly published: number;
    readonly sendErrors: number;
    readonly replayRequests: number;
  } {
    const s = this.#transport.stats;
    return { published: s.published, sendErrors: s.sendErrors, replayRequests: s.replayRequests };
  }

  /** Unbind and close the sockets; batches not yet sent are discarded (call `flush` first). */
  close(): Promise<void> {
    return this.#transport.close();
  }
}
