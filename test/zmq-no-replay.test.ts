/**
 * Streams without a replay endpoint, over real ZeroMQ on loopback: a reconnect (network
 * outage or engine restart) cannot be checked against the engine, so what the worker
 * held before it must never be served as held afterwards (docs/ingestion.md, "The
 * stream rules": SUB reconnects without a replay endpoint).
 */

import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { EnginePublisher } from "../src/engine/publisher.js";
import { DecodeThread } from "../src/ingest/decode-thread.js";
import { KvEventSubscriber } from "../src/ingest/kv-event-subscriber.js";
import { workerKey } from "../src/protocol/worker.js";
import {
  emptyBatch,
  freePortRange,
  hex,
  RecordingIndex,
  storedBatch,
  waitFor,
} from "./zmq-helpers.js";

const W = workerKey("w1", 0);

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function engine(endpoint: string): Promise<EnginePublisher> {
  const pub = await EnginePublisher.bind({ endpoint, replayEndpoint: null, topic: "kv-events" });
  cleanups.push(() => pub.close());
  return pub;
}

function subscriber(index: RecordingIndex, endpoint: string, decodeThread: boolean) {
  const sub = new KvEventSubscriber(
    {
      worker: W,
      endpoint,
      replayEndpoint: null,
      topic: "kv-events",
      format: "vllm",
      reconnectIntervalMs: 20,
      reconnectMaxIntervalMs: 100,
      decodeThread,
    },
    index,
  );
  cleanups.push(() => sub.close());
  return sub;
}

/** Publish empty batches until one arrives live (the subscription is in place). */
async function untilLive(pub: EnginePublisher, sub: KvEventSubscriber): Promise<void> {
  const before = sub.state().batches;
  const deadline = Date.now() + 10_000;
  while (sub.state().batches === before) {
    if (Date.now() > deadline) throw new Error("subscription never became live");
    pub.publish(emptyBatch());
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  await waitFor("caught up", () => sub.state().lastSeq === pub.nextSeq - 1n);
}

/**
 * An engine on a fresh endpoint whose stream the subscriber holds `blocks` blocks of,
 * then stopped: the subscriber has seen the disconnect. Returns what the next engine on
 * the same endpoint needs.
 */
async function stoppedEngine(index: RecordingIndex, threaded: boolean, blocks: number) {
  const endpoint = `tcp://127.0.0.1:${await freePortRange(1)}`;
  const first = await EnginePublisher.bind({ endpoint, replayEndpoint: null, topic: "kv-events" });
  const sub = subscriber(index, endpoint, threaded);
  await untilLive(first, sub);
  for (let h = 1n; h <= BigInt(blocks); h++) first.publish(storedBatch([h]));
  await waitFor("old engine's blocks", () => index.of(W).length === blocks);
  const next = first.nextSeq;
  await first.close();
  await waitFor("disconnect", () => !sub.state().connected);
  return { endpoint, sub, next };
}

describe.each([false, true])(
  "a stream without a replay endpoint (decodeThread: %s)",
  (threaded) => {
    beforeAll(async () => {
      if (threaded) await DecodeThread.acquire().ready();
    });
    afterAll(() => DecodeThread.release());

    it("clears the worker on reconnect after an outage that lost batches", async () => {
      const index = new RecordingIndex();
      const endpoint = `tcp://127.0.0.1:${await freePortRange(1)}`;
      const pub = await engine(endpoint);
      const sub = subscriber(index, endpoint, threaded);
      await untilLive(pub, sub);
      for (const h of [1n, 2n, 3n]) pub.publish(storedBatch([h]));
      await waitFor("three blocks", () => index.of(W).length === 3);
      await pub.interruptConnections(async () => {
        await waitFor("disconnect", () => !sub.state().connected);
        // Lost on the wire: block 2 is evicted, block 4 stored.
        pub.publish({
          ts: 1,
          dpRank: null,
          events: [{ type: "BlockRemoved", blockHashes: [2n], medium: "GPU" }],
        });
        pub.publish(storedBatch([4n]));
      });
      await waitFor("reconnect", () => sub.state().connected);
      // Nothing new has arrived yet, and nothing can be replayed: block 2 must not be held.
      await waitFor("cleared", () => index.of(W).length === 0, 2000);
      await untilLive(pub, sub);
      pub.publish(storedBatch([5n]));
      await waitFor("live again", () => sub.state().lastSeq === pub.nextSeq - 1n);
      expect(index.of(W)).toEqual([hex(5n)]);
      expect(sub.state().resets.unfilled_gap).toBe(1);
      expect(sub.state().gaps).toBe(1); // seen, but not counted as a second loss
    });

    it("clears the worker when a restarted engine is quiet after the reconnect", async () => {
      const index = new RecordingIndex();
      const { endpoint, sub } = await stoppedEngine(index, threaded, 3);
      await engine(endpoint); // the restarted engine: an empty cache, nothing published yet
      await waitFor("reconnect", () => sub.state().connected);
      await waitFor("cleared", () => index.of(W).length === 0, 2000);
      expect(sub.state().resets.unfilled_gap).toBe(1);
    });

    it("keeps only the new engine's blocks when its stream lines up with the old one", async () => {
      const index = new RecordingIndex();
      const { endpoint, sub, next } = await stoppedEngine(index, threaded, 3);
      const second = await engine(endpoint);
      await waitFor("reconnect", () => sub.state().connected);
      // The restarted engine's first batches never reach the router; the one it does see
      // carries exactly the seq it expects next: no gap, no seq going back.
      second.dropNext(Number(next));
      for (let i = 0n; i < next; i++) second.publish(storedBatch([900n + i]));
      await new Promise((resolve) => setTimeout(resolve, 100)); // the subscription reaches the PUB
      second.publish(storedBatch([950n]));
      await waitFor("batch seen", () => sub.state().lastSeq === next, 2000);
      expect(sub.state().lastSeq).toBe(next);
      expect(index.of(W)).toEqual([hex(950n)]);
    });

    it("rebuilds from a restarted engine whose seq starts over", async () => {
      const index = new RecordingIndex();
      const { endpoint, sub } = await stoppedEngine(index, threaded, 10);
      const second = await engine(endpoint);
      await waitFor("reconnect", () => sub.state().connected);
      await untilLive(second, sub); // seq 0, 1, … : below the 10 + seen before
      second.publish(storedBatch([500n]));
      await waitFor("new block", () => index.of(W).includes(hex(500n)));
      expect(index.of(W)).toEqual([hex(500n)]);
      expect(sub.state().lastSeq).toBe(second.nextSeq - 1n);
    });
  },
);
