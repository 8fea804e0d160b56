/**
 * KvEventSubscriber against a real EnginePublisher over ZeroMQ on loopback: ordering,
 * gap replay in every reply layout, holes replay cannot fill, malformed payloads,
 * timeouts, and engine restarts.
 */

import pino from "pino";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Router } from "zeromq";
import { EnginePublisher, type EnginePublisherOptions } from "../src/engine/publisher.js";
import { computeBlockKeys } from "../src/index/block-key.js";
import { RadixTreeIndex } from "../src/index/radix-tree.js";
import type { PrefixIndex } from "../src/index/types.js";
import { DecodeThread } from "../src/ingest/decode-thread.js";
import { KvEventSubscriber } from "../src/ingest/kv-event-subscriber.js";
import type {
  KvEventSubscriberDeps,
  KvEventSubscriberOptions,
} from "../src/ingest/subscriber-options.js";
import { encodeEventBatch, type WireBatch } from "../src/protocol/event-encoder.js";
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
const LOOPBACK = "tcp://127.0.0.1:*";

/** Every scenario runs twice: decoding on the main thread, and on the decode thread. */
let decodeThread = false;

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function publisher(options: Partial<EnginePublisherOptions> = {}): Promise<EnginePublisher> {
  const pub = await EnginePublisher.bind({
    endpoint: LOOPBACK,
    replayEndpoint: LOOPBACK,
    topic: "kv-events",
    ...options,
  });
  cleanups.push(() => pub.close());
  return pub;
}

function subscriber(
  index: PrefixIndex,
  pub: EnginePublisher,
  options: Partial<KvEventSubscriberOptions> = {},
  deps: KvEventSubscriberDeps = {},
): KvEventSubscriber {
  const sub = new KvEventSubscriber(
    {
      worker: W,
      endpoint: pub.endpoint,
      replayEndpoint: pub.replayEndpoint,
      topic: "kv-events",
      format: "vllm",
      replayTimeoutMs: 1000,
      reconnectIntervalMs: 20,
      reconnectMaxIntervalMs: 100,
      decodeThread,
      ...options,
    },
    index,
    deps,
  );
  cleanups.push(() => sub.close());
  return sub;
}

/** Publish empty batches until one arrives live (the SUB's subscription is in place). */
async function untilLive(pub: EnginePublisher, sub: KvEventSubscriber): Promise<void> {
  const live = () => sub.state().batches - sub.state().replayedBatches > 0;
  const deadline = Date.now() + 15_000;
  while (!live()) {
    if (Date.now() > deadline) throw new Error("subscription never became live");
    pub.publish(emptyBatch());
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  await waitFor("idle", () => sub.state().lastSeq === pub.nextSeq - 1n && !sub.state().replaying);
}

const range = (from: number, to: number) =>
  Array.from({ length: to - from }, (_, i) => BigInt(from + i));

describe.each([false, true])("KvEventSubscriber over ZeroMQ (decodeThread: %s)", (threaded) => {
  beforeAll(async () => {
    decodeThread = threaded;
    // A router's decode thread is up long before a stream matters; starting it (a few
    // hundred ms under tsx) inside each test would make the slow-joiner window depend
    // on that start. Held for the whole block, as a running router holds it.
    if (threaded) await DecodeThread.acquire().ready();
  });
  afterAll(() => DecodeThread.release());

  it("applies a stream in order, recovering the slow-joiner start through replay", async () => {
    const index = new RecordingIndex();
    const pub = await publisher();
    const sub = subscriber(index, pub);
    // Published at once: the SUB is not live yet, the first-contact replay brings them.
    for (let i = 1; i <= 30; i++) pub.publish(storedBatch([BigInt(i)]));
    await waitFor("30 batches", () => index.of(W).length === 30);
    expect(index.of(W)).toEqual(range(1, 31).map(hex));
    const s = sub.state();
    expect(s.lastSeq).toBe(29n);
    expect(s.batches).toBe(30);
    expect(s.events["stored/applied"]).toBe(30);
    expect(s.resets).toEqual({
      restart: 0,
      unfilled_gap: 0,
      startup_hole: 0,
      replay_failed: 0,
      replay_mismatch: 0,
    });
    expect(s.replays).toBeGreaterThanOrEqual(1);
    expect(s.lastEventTimeMs).not.toBeNull();
    await waitFor("connected", () => sub.state().connected);
  });

  it.each(["new", "old", "mooncake-dev"] as const)(
    "fills dropped batches by replay (%s layout)",
    async (replayLayout) => {
      const index = new RecordingIndex();
      const pub = await publisher({ replayLayout });
      const sub = subscriber(index, pub);
      await untilLive(pub, sub);
      const before = sub.state();
      pub.publish(storedBatch([101n]));
      pub.dropNext(3);
      for (const h of [102n, 103n, 104n, 105n, 106n]) pub.publish(storedBatch([h]));
      await waitFor("all six", () => index.of(W).length === 6);
      expect(index.of(W)).toEqual([101n, 102n, 103n, 104n, 105n, 106n].map(hex));
      const s = sub.state();
      expect(s.gaps - before.gaps).toBe(1);
      expect(s.replays - before.replays).toBe(1);
      expect(s.replayedBatches - before.replayedBatches).toBeGreaterThanOrEqual(3);
      expect(s.resets.unfilled_gap).toBe(0);
      expect(s.lastSeq).toBe(pub.nextSeq - 1n);
      expect(pub.stats.dropped).toBe(3);
    },
  );

  it("clears the worker when the replay buffer no longer holds the gap", async () => {
    const index = new RecordingIndex();
    const pub = await publisher({ bufferSteps: 3 });
    const sub = subscriber(index, pub);
    await untilLive(pub, sub);
    pub.publish(storedBatch([1n]));
    await waitFor("first", () => index.of(W).length === 1);
    pub.dropNext(10);
    for (let i = 2; i <= 11; i++) pub.publish(storedBatch([BigInt(i)]));
    pub.publish(storedBatch([12n]));
    // Replay only has the last 3 batches: 10, 11 (dropped) and 12.
    await waitFor("reset and resume", () => sub.state().lastSeq === pub.nextSeq - 1n);
    expect(index.of(W)).toEqual([10n, 11n, 12n].map(hex));
    const s = sub.state();
    expect(s.resets.unfilled_gap).toBe(1);
    expect(s.gaps).toBe(1);
    expect(index.removals.get(W)).toBe(1);
  });

  it("clears the worker on a gap when there is no replay endpoint", async () => {
    const index = new RecordingIndex();
    const pub = await publisher({ replayEndpoint: null });
    const sub = subscriber(index, pub, { replayEndpoint: null });
    await untilLive(pub, sub);
    pub.publish(storedBatch([1n]));
    pub.dropNext(2);
    pub.publish(storedBatch([2n]));
    pub.publish(storedBatch([3n]));
    pub.publish(storedBatch([4n]));
    await waitFor("resume", () => sub.state().lastSeq === pub.nextSeq - 1n);
    expect(index.of(W)).toEqual([hex(4n)]);
    expect(sub.state().resets.unfilled_gap).toBe(1);
    expect(sub.state().replays).toBe(0);
  });

  it.each(["absent", "silent"] as const)(
    "times out when the replay endpoint is %s: retries, then clears the worker and goes on",
    async (kind) => {
      const index = new RecordingIndex();
      const pub = await publisher({ replayEndpoint: null });
      let replayEndpoint: string;
      if (kind === "silent") {
        const router = new Router({ linger: 0 });
        await router.bind(LOOPBACK);
        cleanups.push(async () => router.close());
        replayEndpoint = router.lastEndpoint!;
      } else {
        replayEndpoint = `tcp://127.0.0.1:${await freePortRange(1)}`;
      }
      const sub = subscriber(index, pub, {
        replayEndpoint,
        replayTimeoutMs: 200,
        replayMaxAttempts: 1,
        replayBackoffMs: 10,
      });
      await untilLive(pub, sub);
      pub.publish(storedBatch([1n]));
      pub.dropNext(1);
      pub.publish(storedBatch([2n]));
      pub.publish(storedBatch([3n]));
      await waitFor("resume", () => sub.state().lastSeq === pub.nextSeq - 1n);
      await waitFor("drained", () => index.of(W).length === 1);
      expect(index.of(W)).toEqual([hex(3n)]);
      const s = sub.state();
      // First contact and the gap: each tried twice (one retry) before giving up.
      expect(s.replayFailures.timeout).toBeGreaterThanOrEqual(4);
      expect(s.resets.replay_failed).toBe(1);
      expect(s.resets.unfilled_gap).toBe(0);
      expect(s.current).toBe(true);
      expect(s.replaying).toBe(false);
    },
  );

  it("counts malformed payloads and applies the rest", async () => {
    const index = new RecordingIndex();
    const pub = await publisher({ encoding: { eventForm: "array", hashForm: "int64" } });
    const sub = subscriber(index, pub);
    await untilLive(pub, sub);
    for (let i = 1; i <= 10; i++) {
      pub.publish(storedBatch([BigInt(i)]));
      if (i % 3 === 0) pub.publishRaw(new Uint8Array([0x92, 0xcb])); // truncated msgpack
      if (i === 5) pub.publishRaw(new Uint8Array([0xa2, 0x68, 0x69])); // "hi": not a batch
    }
    await waitFor("all", () => sub.state().lastSeq === pub.nextSeq - 1n);
    expect(index.of(W)).toEqual(range(1, 11).map(hex));
    const s = sub.state();
    expect(s.decodeErrors).toEqual({ not_msgpack: 3, bad_envelope: 1 });
    expect(s.batches).toBe(Number(pub.nextSeq));
    expect(s.resets.unfilled_gap + s.resets.restart).toBe(0);
  });

  it("logs each bad batch once with worker, seq and code, and resets with their reason", async () => {
    const records: Record<string, unknown>[] = [];
    const logger = pino(
      { level: "debug" },
      { write: (line: string) => records.push(JSON.parse(line)) },
    );
    const index = new RecordingIndex();
    const pub = await publisher({ replayEndpoint: null });
    const sub = subscriber(index, pub, { replayEndpoint: null }, { logger, now: () => 1234 });
    await untilLive(pub, sub);
    const bad = pub.publishRaw(new Uint8Array([0x92, 0xcb]));
    pub.dropNext(1);
    pub.publish(storedBatch([1n]));
    pub.publish(storedBatch([2n]));
    await waitFor("applied", () => sub.state().lastSeq === pub.nextSeq - 1n);
    const decode = records.filter((r) => r.msg === "kv events batch undecodable, skipped");
    expect(decode).toHaveLength(1);
    expect(decode[0]).toMatchObject({
      level: 40,
      worker: W,
      seq: String(bad),
      code: "not_msgpack",
    });
    const resets = records.filter((r) => r.msg === "kv events stream reset, worker cleared");
    expect(resets.map((r) => r.reason)).toContain("unfilled_gap");
    expect(sub.state().lastEventTimeMs).toBe(1234);
  });

  it("rebuilds the worker from a restarted engine (seq back to 0 on the same port)", async () => {
    const index = new RecordingIndex();
    const p = await freePortRange(2);
    const opts = {
      endpoint: `tcp://127.0.0.1:${p}`,
      replayEndpoint: `tcp://127.0.0.1:${p + 1}`,
    };
    const first = await EnginePublisher.bind({ ...opts, topic: "kv-events" });
    const sub = subscriber(index, first);
    await untilLive(first, sub);
    for (let i = 1; i <= 40; i++) first.publish(storedBatch([BigInt(i)]));
    await waitFor("first engine", () => index.of(W).length === 40);
    await first.close();
    await waitFor("disconnect", () => !sub.state().connected);

    const second = await publisher({ ...opts });
    const published: bigint[] = [];
    // Fewer batches than the first engine sent, so the restart shows as seq going back.
    for (let i = 0; i < 30 && sub.state().resets.restart === 0; i++) {
      const h = 1000n + BigInt(i);
      published.push(h);
      second.publish(storedBatch([h]));
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await waitFor("caught up", () => sub.state().lastSeq === second.nextSeq - 1n);
    expect(sub.state().resets.restart).toBe(1);
    expect(index.of(W)).toEqual(published.map(hex));
    expect(sub.state().connected).toBe(true);
  });

  it("rebuilds a RadixTreeIndex from a restarted engine: old prompts stop matching", async () => {
    const tokensA = Array.from({ length: 32 }, (_, i) => 500 + i);
    const tokensB = Array.from({ length: 48 }, (_, i) => 9000 + i);
    const prompt = (hashes: bigint[], tokenIds: number[]): WireBatch => ({
      ts: 1,
      dpRank: null,
      events: [
        {
          type: "BlockStored",
          blockHashes: hashes,
          parentHash: null,
          tokenIds,
          blockSize: 16,
          loraId: null,
          medium: "GPU",
          loraName: null,
        },
      ],
    });
    const gpu = (index: RadixTreeIndex, tokens: number[]) =>
      index.findMatches(computeBlockKeys(tokens, 16, null)).workers.find((w) => w.worker === W)
        ?.gpu ?? 0;
    const index = new RadixTreeIndex({ blockSize: 16 });
    const p = await freePortRange(2);
    const opts = {
      endpoint: `tcp://127.0.0.1:${p}`,
      replayEndpoint: `tcp://127.0.0.1:${p + 1}`,
      topic: "kv-events",
    };
    const first = await EnginePublisher.bind(opts);
    const sub = new KvEventSubscriber(
      {
        worker: W,
        ...opts,
        format: "vllm",
        reconnectIntervalMs: 20,
        reconnectMaxIntervalMs: 100,
        decodeThread,
      },
      index,
    );
    cleanups.push(() => sub.close());
    for (let i = 0; i < 5; i++) first.publish(emptyBatch());
    first.publish(prompt([11n, 12n], tokensA));
    await waitFor("prompt A indexed", () => gpu(index, tokensA) === 2);
    await first.close();
    const second = await publisher({ ...opts });
    // The restarted engine's seq 0 is below the 6 already seen: a restart, worker cleared.
    second.publish(prompt([21n, 22n, 23n], tokensB));
    await waitFor("prompt B indexed", () => gpu(index, tokensB) === 3);
    expect(gpu(index, tokensA)).toBe(0);
    expect(sub.state().resets.restart).toBe(1);
    expect(sub.state().events["stored/applied"]).toBe(2);
  });

  it("recognises a restarted engine that is already past the old seq, or quiet", async () => {
    const index = new RecordingIndex();
    const p = await freePortRange(2);
    const opts = {
      endpoint: `tcp://127.0.0.1:${p}`,
      replayEndpoint: `tcp://127.0.0.1:${p + 1}`,
    };
    const first = await EnginePublisher.bind({ ...opts, topic: "kv-events" });
    const sub = subscriber(index, first);
    for (let i = 1; i <= 3; i++) first.publish(storedBatch([BigInt(i)]));
    await waitFor("first engine", () => index.of(W).length === 3);
    await first.close();
    await waitFor("disconnect", () => !sub.state().connected);
    const second = await publisher({ ...opts });
    // More batches than the first engine sent, at once, then silence: seq never goes back
    // on the live stream, so only the reconnect check can tell the streams apart.
    const hashes = range(500, 510);
    for (const h of hashes) second.publish(storedBatch([h]));
    await waitFor("rebuilt", () => sub.state().lastSeq === 9n && !sub.state().replaying);
    expect(index.of(W)).toEqual(hashes.map(hex));
    expect(sub.state().resets.restart).toBe(1);
    expect(sub.state().resets.unfilled_gap).toBe(0);
  });

  it("detects an engine restart that happens while a replay is in flight", async () => {
    // A scripted replay endpoint: the first request (from 0) gets the old engine's three
    // batches and then silence, so the replay is still running when the engine restarts.
    const index = new RecordingIndex();
    const router = new Router({ linger: 0 });
    await router.bind(LOOPBACK);
    cleanups.push(async () => router.close());
    const seq8 = (n: bigint) => {
      const b = Buffer.alloc(8);
      b.writeBigUInt64BE(n);
      return b;
    };
    const end = Buffer.alloc(8, 0xff);
    const oldBatches = [1n, 2n, 3n].map((h) => encodeEventBatch(storedBatch([h])));
    const newBatch = encodeEventBatch(storedBatch([9n]));
    const requests: bigint[] = [];
    void (async () => {
      for await (const [id, , from] of router) {
        const start = from!.readBigUInt64BE();
        requests.push(start);
        if (requests.length === 1) {
          for (const [i, p] of oldBatches.entries()) {
            await router.send([id!, "", "kv-events", seq8(BigInt(i)), p]);
          }
          continue; // no end marker: the replay hangs until its timeout
        }
        // The restarted engine holds only its batch 0.
        if (start === 0n) await router.send([id!, "", "kv-events", seq8(0n), newBatch]);
        await router.send([id!, "", "", end, ""]);
      }
    })().catch(() => {}); // ends when the router is closed by the cleanup

    const port = await freePortRange(1);
    const endpoint = `tcp://127.0.0.1:${port}`;
    const first = await EnginePublisher.bind({
      endpoint,
      replayEndpoint: null,
      topic: "kv-events",
    });
    const sub = subscriber(index, first, {
      replayEndpoint: router.lastEndpoint!,
      replayTimeoutMs: 1500,
    });
    await waitFor("old batches replayed", () => index.of(W).length === 3);
    expect(sub.state().replaying).toBe(true);
    await first.close();
    await waitFor("disconnect", () => !sub.state().connected);
    const second = await publisher({ endpoint, replayEndpoint: null });
    await waitFor("reconnect", () => sub.state().connected);
    second.publish(storedBatch([9n])); // seq 0 again, queued behind the hanging replay

    await waitFor("rebuilt", () => index.of(W).join() === hex(9n) && !sub.state().replaying);
    expect(sub.state().resets.restart).toBe(1);
    expect(sub.state().replayFailures.timeout).toBe(1);
    expect(requests.slice(0, 3)).toEqual([0n, 2n, 0n]);
  });

  it("continues the same stream after a network outage (no false restart)", async () => {
    const index = new RecordingIndex();
    const pub = await publisher();
    const sub = subscriber(index, pub);
    for (let i = 1; i <= 3; i++) pub.publish(storedBatch([BigInt(i)]));
    await waitFor("before", () => index.of(W).length === 3);
    await pub.interruptConnections(async () => {
      await waitFor("disconnect", () => !sub.state().connected);
      for (let i = 4; i <= 6; i++) pub.publish(storedBatch([BigInt(i)]));
    });
    await waitFor("reconnect check", () => sub.state().lastSeq === 5n && !sub.state().replaying);
    expect(index.of(W)).toEqual(range(1, 7).map(hex));
    const s = sub.state();
    expect(s.resets).toEqual({
      restart: 0,
      unfilled_gap: 0,
      startup_hole: 0,
      replay_failed: 0,
      replay_mismatch: 0,
    });
    expect(s.duplicates).toBeGreaterThanOrEqual(1); // the compared batch
  });

  it("closes cleanly while a replay is waiting", async () => {
    const index = new RecordingIndex();
    const router = new Router({ linger: 0 });
    await router.bind(LOOPBACK);
    cleanups.push(async () => router.close());
    const pub = await publisher({ replayEndpoint: null });
    const sub = new KvEventSubscriber(
      {
        worker: W,
        endpoint: pub.endpoint,
        replayEndpoint: router.lastEndpoint,
        topic: "",
        format: "vllm",
        replayTimeoutMs: 60_000,
        decodeThread,
      },
      index,
    );
    await waitFor("replaying", () => sub.state().replaying);
    await sub.close();
    await sub.close();
    expect(sub.state().connected).toBe(false);
  });
});
