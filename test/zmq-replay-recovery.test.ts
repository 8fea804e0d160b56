/**
 * Replays that stop early, late engines, and a router restart facing many engines, over
 * real ZeroMQ sockets (docs/ingestion.md, "Replays that stop early"). Each engine's
 * batches store one block and remove an older one, so a partial replay leaves blocks the
 * engine no longer holds: exactly the false positives these tests rule out.
 */

import { afterEach, describe, expect, it } from "vitest";
import { Router } from "zeromq";
import { EnginePublisher } from "../src/engine/publisher.js";
import type { KvEventSubscriber } from "../src/ingest/kv-event-subscriber.js";
import { SubscriberPool } from "../src/ingest/subscriber-pool.js";
import { encodeEventBatch, type WireBatch } from "../src/protocol/event-encoder.js";
import { workerKey } from "../src/protocol/worker.js";
import {
  freePortRange,
  hex,
  RecordingIndex,
  replayTestSubscriber,
  waitFor,
} from "./zmq-helpers.js";

const W = workerKey("w1", 0);
const LOOPBACK = "tcp://127.0.0.1:*";
const KEEP = 5; // blocks the engine still holds at the end

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** Batch k stores block `base + k + 1` and removes the one stored `keep` batches before. */
function churn(k: number, base = 0, keep = KEEP): WireBatch {
  const h = BigInt(base + k + 1);
  return {
    ts: 1_789_095_808.5,
    dpRank: null,
    events: [
      {
        type: "BlockStored",
        blockHashes: [h],
        parentHash: k === 0 ? null : h - 1n,
        tokenIds: Array.from({ length: 16 }, (_, i) => k * 16 + i),
        blockSize: 16,
        loraId: null,
        medium: "GPU",
        loraName: null,
      },
      ...(k >= keep
        ? [{ type: "BlockRemoved" as const, blockHashes: [h - BigInt(keep)], medium: "GPU" }]
        : []),
    ],
  };
}

/** What the engine holds after batches 0..n−1, as the recording index lists it. */
function held(n: number, base = 0, keep = KEEP): string[] {
  return Array.from({ length: Math.min(n, keep) }, (_, i) =>
    hex(BigInt(base + n - Math.min(n, keep) + i + 1)),
  );
}

async function quietPublisher(endpoint = LOOPBACK): Promise<EnginePublisher> {
  const pub = await EnginePublisher.bind({ endpoint, replayEndpoint: null, topic: "kv-events" });
  cleanups.push(() => pub.close());
  return pub;
}

/**
 * A replay ROUTER that answers request number `call` (from 0) with the batches of seq
 * `from`..`upTo − 1` (the request's start if `from` is absent; `skip` left out; or the seqs of
 * `order`, in that order) and then, if `end`, the end marker; otherwise it goes silent, as a replay connection that stalls does.
 */
async function scriptedReplay(
  payloads: readonly Uint8Array[],
  answer: (
    call: number,
    start: number,
  ) => { from?: number; upTo: number; end: boolean; skip?: number; order?: readonly number[] },
): Promise<{ endpoint: string; requests: number[] }> {
  const router = new Router({ linger: 0 });
  await router.bind(LOOPBACK);
  cleanups.push(async () => router.close());
  const requests: number[] = [];
  const seq8 = (n: number) => {
    const b = Buffer.alloc(8);
    b.writeBigUInt64BE(BigInt(n));
    return b;
  };
  void (async () => {
    for await (const [id, , start] of router) {
      const from = Number(start!.readBigUInt64BE());
      const a = answer(requests.length, from);
      requests.push(from);
      const seqs =
        a.order ??
        Array.from(
          { length: Math.max(0, a.upTo - (a.from ?? from)) },
          (_, i) => (a.from ?? from) + i,
        );
      for (const s of seqs) {
        if (s === a.skip) continue;
        await router.send([id!, "", "kv-events", seq8(s), payloads[s]!]);
      }
      if (a.end) await router.send([id!, "", "", Buffer.alloc(8, 0xff), ""]);
    }
  })().catch(() => {}); // ends when the router is closed
  return { endpoint: router.lastEndpoint!, requests };
}

function subscriber(
  index: RecordingIndex,
  endpoint: string,
  replayEndpoint: string,
  extra: Partial<ConstructorParameters<typeof KvEventSubscriber>[0]> = {},
): KvEventSubscriber {
  const sub = replayTestSubscriber(index, endpoint, replayEndpoint, extra);
  cleanups.push(() => sub.close());
  return sub;
}

const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);

const N = 20;
const STALL_AT = (N * 4) / 10; // the connection goes silent after 40 % of the batches
const payloads = Array.from({ length: N }, (_, k) => encodeEventBatch(churn(k)));

describe("a replay that stops early never becomes the index's state", () => {
  it("resumes a stalled first-contact replay from the last applied seq + 1", async () => {
    const index = new RecordingIndex();
    const pub = await quietPublisher();
    const replay = await scriptedReplay(payloads, (call) =>
      call === 0 ? { upTo: STALL_AT, end: false } : { upTo: N, end: true },
    );
    const sub = subscriber(index, pub.endpoint, replay.endpoint);
    await waitFor("partial replay", () => index.of(W).length > 0);
    expect(sub.state().current).toBe(false);
    await waitFor("resumed", () => sub.state().lastSeq === BigInt(N - 1) && sub.state().current);
    expect(index.of(W)).toEqual(held(N));
    expect(replay.requests).toEqual([0, STALL_AT]);
    const s = sub.state();
    expect(s.replayFailures.timeout).toBe(1);
    expect(Object.values(s.resets).every((n) => n === 0)).toBe(true);
  });

  it("clears and flags the worker when the engine never answers the rest", async () => {
    const index = new RecordingIndex();
    const pub = await quietPublisher();
    const replay = await scriptedReplay(payloads, (call) => ({
      upTo: call === 0 ? STALL_AT : 0,
      end: false,
    }));
    const sub = subscriber(index, pub.endpoint, replay.endpoint, { replayMaxAttempts: 2 });
    await waitFor("partial replay", () => index.of(W).length > 0);
    expect(sub.state().current).toBe(false); // flagged while it retries
    await waitFor("given up", () => sub.state().resets.replay_failed === 1);
    expect(index.of(W)).toEqual([]); // nothing stale left behind
    expect(sub.state().current).toBe(true);
    expect(replay.requests).toEqual([0, STALL_AT, STALL_AT, STALL_AT]);
  });

  it("clears when the resumed replay shows the engine's buffer moved past the hole", async () => {
    const index = new RecordingIndex();
    const pub = await quietPublisher();
    const replay = await scriptedReplay(payloads, (call) =>
      call === 0 ? { upTo: STALL_AT, end: false } : { from: 12, upTo: N, end: true },
    );
    const sub = subscriber(index, pub.endpoint, replay.endpoint);
    await waitFor("caught up", () => sub.state().lastSeq === BigInt(N - 1) && sub.state().current);
    expect(sub.state().resets.unfilled_gap).toBe(1);
    expect(index.of(W)).toEqual(held(N)); // blocks 1..8 from before the hole are gone
  });

  it("asks a hole inside a replay again from the hole, without clearing", async () => {
    const index = new RecordingIndex();
    const pub = await quietPublisher();
    // The first answer skips seq 9 and ends: a hole, not a complete replay.
    const replay = await scriptedReplay(payloads, (call, start) =>
      call === 0 ? { upTo: N, skip: 9, end: true } : { from: start, upTo: N, end: true },
    );
    const sub = subscriber(index, pub.endpoint, replay.endpoint);
    await waitFor("caught up", () => sub.state().lastSeq === BigInt(N - 1) && sub.state().current);
    expect(index.of(W)).toEqual(held(N));
    expect(replay.requests).toEqual([0, 9]);
    expect(Object.values(sub.state().resets).every((n) => n === 0)).toBe(true);
  });

  // The two below pass without a change to the subscriber: they pin down that replies out
  // of seq order are never applied out of order, nor over a removal they skipped.
  it("asks again from the first seq a reply out of order skipped", async () => {
    const index = new RecordingIndex();
    const pub = await quietPublisher();
    const swapped = [...Array.from({ length: 9 }, (_, i) => i), 10, 9, ...range(11, N)];
    const replay = await scriptedReplay(payloads, (call, start) =>
      call === 0 ? { upTo: N, order: swapped, end: true } : { from: start, upTo: N, end: true },
    );
    const sub = subscriber(index, pub.endpoint, replay.endpoint);
    await waitFor("caught up", () => sub.state().lastSeq === BigInt(N - 1) && sub.state().current);
    expect(index.of(W)).toEqual(held(N));
    expect(replay.requests).toEqual([0, 9]);
    expect(Object.values(sub.state().resets).every((n) => n === 0)).toBe(true);
  });

  it("clears on a gap replay that starts past the seq asked, its batch coming after", async () => {
    // Batches 0..9 by the first-contact replay; live from 12 (a gap); the gap replay
    // answers 11, then 10 (which removes block 6), then the rest. Applying 11 on top
    // of what the worker holds would keep block 6, whose removal came late.
    const index = new RecordingIndex();
    const pub = await EnginePublisher.bind({
      endpoint: LOOPBACK,
      replayEndpoint: null,
      topic: "kv-events",
      firstSeq: 12n,
    });
    cleanups.push(() => pub.close());
    const replay = await scriptedReplay(payloads, (call) =>
      call === 0
        ? { upTo: 10, end: true }
        : { upTo: N, order: [11, 10, ...range(12, N)], end: true },
    );
    const sub = subscriber(index, pub.endpoint, replay.endpoint);
    await waitFor("first contact", () => sub.state().lastSeq === 9n && sub.state().current);
    // Live batches until one gets through the slow joiner: the gap.
    await waitFor("gap", () => {
      if (sub.state().gaps === 0 && pub.nextSeq < BigInt(N)) {
        pub.publishRaw(payloads[Number(pub.nextSeq)]!);
      }
      return sub.state().gaps > 0;
    });
    await waitFor("caught up", () => sub.state().lastSeq === BigInt(N - 1) && sub.state().current);
    expect(index.of(W)).toEqual(held(N));
    expect(sub.state().resets.unfilled_gap).toBe(1);
    expect(replay.requests).toEqual([0, 10]);
  });
});

describe.each([false, true])(
  "an engine that starts after the router (decodeThread: %s)",
  (threaded) => {
    it("replays from 0 on the first successful connection, however late", async () => {
      const base = await freePortRange(2);
      const endpoint = `tcp://127.0.0.1:${base}`;
      const replayEndpoint = `tcp://127.0.0.1:${base + 1}`;
      const index = new RecordingIndex();
      // A long reconnect interval stands in for ZeroMQ's back-off grown to 5 s: the SUB
      // connects well after the first-contact replay has given up.
      const sub = subscriber(index, endpoint, replayEndpoint, {
        replayTimeoutMs: 100,
        replayMaxAttempts: 0,
        reconnectIntervalMs: 1500,
        reconnectMaxIntervalMs: 1500,
        decodeThread: threaded,
      });
      await waitFor("first contact given up", () => {
        const s = sub.state();
        return s.replayFailures.timeout >= 1 && !s.replaying;
      });
      const pub = await EnginePublisher.bind({ endpoint, replayEndpoint, topic: "kv-events" });
      cleanups.push(() => pub.close());
      for (let k = 0; k < 8; k++) pub.publish(churn(k));
      await pub.flush();
      expect(sub.state().connected).toBe(false); // so those batches were not seen live
      await waitFor("recovered", () => sub.state().lastSeq === 7n && sub.state().current);
      expect(index.of(W)).toEqual(held(8));
      expect(sub.state().connected).toBe(true);
    });
  },
);

describe("a router restart facing many engines", () => {
  // 4 at once (the default) keeps the engines' ROUTERs under their HWM; 9 at once makes
  // them drop replies, and the replays must resume until complete.
  it.each([4, 9])(
    "9 engines × 5,000 buffered batches, %i replays at once: all complete, exact",
    async (concurrent) => {
      const ENGINES = 9;
      const BATCHES = 5000;
      const KEEP_MANY = 100;
      const pubs: EnginePublisher[] = [];
      for (let i = 0; i < ENGINES; i++) {
        // vLLM's replay ROUTER: HWM 1000, replies past it dropped (end marker included).
        const pub = await EnginePublisher.bind({
          endpoint: LOOPBACK,
          replayEndpoint: LOOPBACK,
          topic: "kv-events",
          replaySendHighWaterMark: 1000,
        });
        cleanups.push(() => pub.close());
        for (let k = 0; k < BATCHES; k++) pub.publish(churn(k, i * 1_000_000, KEEP_MANY));
        await pub.flush();
        pubs.push(pub);
      }
      const index = new RecordingIndex();
      const pool = new SubscriberPool(index, {
        // The default: on a loaded machine a shorter silence is often CPU starvation,
        // and replays that time out 6 times in a row with nothing new clear the worker.
        replayTimeoutMs: 2000,
        replayBackoffMs: 20,
        reconnectIntervalMs: 20,
        reconnectMaxIntervalMs: 100,
        decodeThread: true,
        maxConcurrentReplays: concurrent,
      });
      cleanups.push(() => pool.close());
      for (const [i, pub] of pubs.entries()) {
        pool.add({
          workerId: `e${i}`,
          eventsEndpoint: pub.endpoint,
          replayEndpoint: pub.replayEndpoint,
          topic: "kv-events",
          dataParallelSize: 1,
          format: "vllm",
        });
      }
      const last = BigInt(BATCHES - 1);
      await waitFor(
        "every stream caught up",
        () => pool.states().every((s) => s.lastSeq === last && s.current),
        120_000,
        50,
      ).catch((err: Error) => {
        const brief = pool.states().map((s) => ({
          worker: s.worker,
          lastSeq: String(s.lastSeq),
          current: s.current,
          replays: s.replays,
          failures: s.replayFailures,
          resets: s.resets,
        }));
        throw new Error(`${err.message}: ${JSON.stringify(brief)}`);
      });
      for (let i = 0; i < ENGINES; i++) {
        expect(index.of(workerKey(`e${i}`, 0))).toEqual(held(BATCHES, i * 1_000_000, KEEP_MANY));
      }
      const states = pool.states();
      for (const s of states) expect(Object.values(s.resets).every((n) => n === 0)).toBe(true);
      const sum = (f: (s: (typeof states)[number]) => number) =>
        states.reduce((a, s) => a + f(s), 0);
      console.log(
        `9×5000 replay, ${concurrent} at once: ${sum((s) => s.replays)} requests, ${sum((s) => s.replayFailures.timeout)} timed out (resumed)`,
      );
    },
    180_000,
  );
});
