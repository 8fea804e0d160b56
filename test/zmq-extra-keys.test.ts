/**
 * Extra keys end to end: a vLLM engine publishes (map-encoded, as current vLLM does) a
 * salted prompt and a multimodal prompt whose image sits in block 2; the router's index,
 * fed over real ZeroMQ (with and without the decode thread), must match the salted
 * blocks only for the same `cache_salt`, and the text prompt with the image's
 * placeholder tokens only up to the image.
 */

import { afterEach, describe, expect, it } from "vitest";
import { EnginePublisher } from "../src/engine/publisher.js";
import { chainName, computeBlockKeys } from "../src/index/block-key.js";
import { RadixTreeIndex } from "../src/index/radix-tree.js";
import { KvEventSubscriber } from "../src/ingest/kv-event-subscriber.js";
import type { WireBlockStored } from "../src/protocol/event-encoder.js";
import { workerKey } from "../src/protocol/worker.js";
import { waitFor } from "./zmq-helpers.js";

const W = workerKey("mm", 0);
const BLOCK = 16;
const PROMPT = Array.from({ length: 4 * BLOCK }, (_, i) => 100 + i);
const IMAGE_PROMPT = Array.from({ length: 4 * BLOCK }, (_, i) => 9000 + i);

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function stored(base: bigint, tokens: number[], extraKeys: WireBlockStored["extraKeys"]) {
  return {
    ts: 1,
    dpRank: null,
    events: [
      {
        type: "BlockStored" as const,
        blockHashes: [base, base + 1n, base + 2n, base + 3n],
        parentHash: null,
        tokenIds: tokens,
        blockSize: BLOCK,
        loraId: null,
        medium: "GPU",
        loraName: null,
        extraKeys,
      },
    ],
  };
}

describe.each([false, true])("extra keys over ZeroMQ (decodeThread: %s)", (decodeThread) => {
  it("salted and multimodal blocks never match a plain text prompt", async () => {
    const pub = await EnginePublisher.bind({
      endpoint: "tcp://127.0.0.1:*",
      replayEndpoint: "tcp://127.0.0.1:*",
      topic: "kv-events",
    });
    cleanups.push(() => pub.close());
    pub.publish(stored(0x100n, PROMPT, [["tenant-a"], null, null, null]));
    // vLLM ≥ 0.11: an image's key is (identifier, offset within the block).
    pub.publish(stored(0x200n, IMAGE_PROMPT, [null, null, [["img-sha", 5]], [["img-sha", -11]]]));
    await pub.flush();
    const index = new RadixTreeIndex({ blockSize: BLOCK });
    const sub = new KvEventSubscriber(
      {
        worker: W,
        endpoint: pub.endpoint,
        replayEndpoint: pub.replayEndpoint,
        topic: "kv-events",
        format: "vllm",
        decodeThread,
        reconnectIntervalMs: 20,
      },
      index,
    );
    cleanups.push(() => sub.close());
    await waitFor("replayed", () => sub.state().lastSeq === 1n && sub.state().current);

    const gpu = (tokens: number[], chain: string | null) =>
      index.findMatches(computeBlockKeys(tokens, BLOCK, chain)).workers.find((m) => m.worker === W)
        ?.gpu ?? 0;
    expect(gpu(PROMPT, null)).toBe(0); // the unsalted prompt: nothing
    expect(gpu(PROMPT, chainName(null, "tenant-b"))).toBe(0); // another tenant: nothing
    expect(gpu(PROMPT, chainName(null, "tenant-a"))).toBe(4); // the same salt: all of it
    expect(gpu(IMAGE_PROMPT, null)).toBe(2); // up to the image, not past it
    expect(sub.state().events["stored/applied"]).toBe(2);
  });
});
