/**
 * A replay endpoint that serves another engine's stream (a misconfiguration: e.g. the
 * data-parallel ports off by one), over real ZeroMQ on loopback. Engine A's live batches
 * and engine B's replayed batches share seqs; the live copy of a replayed seq must carry
 * the replay's bytes, so a difference clears the worker (`resets.replay_mismatch`) and
 * the replay endpoint is not used again (docs/ingestion.md, "The stream rules"). Before,
 * B's replayed blocks stayed as A's and A's live batches were dropped as duplicates.
 */

import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { EnginePublisher } from "../src/engine/publisher.js";
import { DecodeThread } from "../src/ingest/decode-thread.js";
import type { KvEventSubscriber } from "../src/ingest/kv-event-subscriber.js";
import { workerKey } from "../src/protocol/worker.js";
import type { LogSink } from "../src/util/log-sink.js";
import { hex, RecordingIndex, replayTestSubscriber, storedBatch, waitFor } from "./zmq-helpers.js";

const W = workerKey("w1", 0);
const LOOPBACK = "tcp://127.0.0.1:*";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function engine(): Promise<EnginePublisher> {
  const pub = await EnginePublisher.bind({
    endpoint: LOOPBACK,
    replayEndpoint: LOOPBACK,
    topic: "kv-events",
  });
  cleanups.push(() => pub.close());
  return pub;
}

interface Logged {
  readonly level: string;
  readonly obj: Record<string, unknown>;
  readonly msg: string | undefined;
}

function recordingLogger(): { logger: LogSink; records: Logged[] } {
  const records: Logged[] = [];
  const at =
    (level: string) =>
    (obj: Record<string, unknown>, msg?: string): void => {
      records.push({ level, obj, msg });
    };
  return {
    logger: { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") },
    records,
  };
}

function subscriber(
  index: RecordingIndex,
  endpoint: string,
  replayEndpoint: string,
  decodeThread: boolean,
  logger?: LogSink,
): KvEventSubscriber {
  const sub = replayTestSubscriber(index, endpoint, replayEndpoint, { decodeThread }, { logger });
  cleanups.push(() => sub.close());
  return sub;
}

const A_BLOCK = 1n; // engine A's batch k stores block A_BLOCK + k
const B_BLOCK = 1000n; // engine B's batch k stores block B_BLOCK + k
const range = (n: number) => Array.from({ length: n }, (_, k) => k);

/**
 * Worker A subscribed to A's live stream and to B's replay endpoint, B holding 50
 * batches: the first-contact replay applies B's, then A publishes 30 batches (seqs 0..29,
 * all below what B's replay brought). Returns once A's last batch is handled.
 */
async function misconfigured(decodeThread: boolean) {
  const index = new RecordingIndex();
  const { logger, records } = recordingLogger();
  const a = await engine();
  const b = await engine();
  for (const k of range(50)) b.publish(storedBatch([B_BLOCK + BigInt(k)]));
  const sub = subscriber(index, a.endpoint, b.replayEndpoint!, decodeThread, logger);
  await waitFor("B's replay applied", () => sub.state().lastSeq === 49n && sub.state().current);
  await waitFor("connected", () => sub.state().connected);
  expect(index.of(W)).toHaveLength(50); // B's blocks, taken for A's: what must not last
  // A's first batches may reach the SUB before its subscription does (slow joiner):
  // publish until one is handled (a mismatch; before the fix, a duplicate), then the rest.
  const handled = () => {
    const s = sub.state();
    return s.resets.replay_mismatch > 0 || s.duplicates > 0;
  };
  let k = 0;
  while (!handled() && k < 20) {
    a.publish(storedBatch([A_BLOCK + BigInt(k++)]));
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  const arrived = k; // every batch from seq arrived − 1 on reaches the SUB
  while (k < 30) a.publish(storedBatch([A_BLOCK + BigInt(k++)]));
  await waitFor(
    "A's last batch handled",
    () => sub.state().lastSeq === 29n || sub.state().duplicates >= 30 - arrived,
    2000,
  );
  return { index, records, a, b, sub };
}

describe.each([false, true])(
  "a replay endpoint of another engine (decodeThread: %s)",
  (threaded) => {
    beforeAll(async () => {
      if (threaded) await DecodeThread.acquire().ready();
    });
    afterAll(() => DecodeThread.release());

    it("clears B's replayed blocks and keeps only A's live ones (replay_mismatch)", async () => {
      const { index, records, a, b, sub } = await misconfigured(threaded);
      const bBlocks = new Set(range(50).map((k) => hex(B_BLOCK + BigInt(k))));
      expect(index.of(W).filter((h) => bBlocks.has(h))).toEqual([]); // none of B's left
      const error = records.find((r) => r.level === "error");
      expect(error?.obj).toMatchObject({
        worker: W,
        endpoint: a.endpoint,
        replayEndpoint: b.replayEndpoint,
      });
      const from = Number(error!.obj.seq); // the first of A's batches that arrived
      expect(from).toBeLessThan(20);
      expect(index.of(W)).toEqual(range(30 - from).map((i) => hex(A_BLOCK + BigInt(from + i))));
      const s = sub.state();
      expect(s.resets).toEqual({
        restart: 0,
        unfilled_gap: 0,
        startup_hole: 0,
        replay_failed: 0,
        replay_mismatch: 1,
      });
      expect(s.current).toBe(true);
      expect(s.duplicates).toBe(0);
      expect(sub.saved()).toBeNull(); // nothing to resume from without the replay endpoint
    });

    it("after the mismatch, a gap clears as without a replay endpoint: no replay asked", async () => {
      const { index, b, a, sub } = await misconfigured(threaded);
      const replays = sub.state().replays;
      const requests = b.stats.replayRequests;
      a.dropNext(2); // seqs 30, 31 lost on the wire
      for (const k of [30, 31, 32]) a.publish(storedBatch([A_BLOCK + BigInt(k)]));
      await waitFor("batch 32", () => sub.state().lastSeq === 32n, 2000);
      const s = sub.state();
      expect(s.resets.unfilled_gap).toBe(1);
      expect(s.resets.replay_mismatch).toBe(1);
      expect(s.gaps).toBe(1);
      expect(index.of(W)).toEqual([hex(A_BLOCK + 32n)]);
      expect(s.current).toBe(true);
      await new Promise((resolve) => setTimeout(resolve, 50)); // a replay would be sent by now
      expect(sub.state().replays).toBe(replays);
      expect(b.stats.replayRequests).toBe(requests);
      expect(a.stats.replayRequests).toBe(0);
    });

    it("never flags its own engine: live copies overlapping a replay are duplicates", async () => {
      const index = new RecordingIndex();
      const { logger, records } = recordingLogger();
      const a = await engine();
      for (const k of range(10)) a.publish(storedBatch([A_BLOCK + BigInt(k)]));
      const sub = subscriber(index, a.endpoint, a.replayEndpoint!, threaded, logger);
      await waitFor("first contact", () => sub.state().lastSeq === 9n && sub.state().current);
      await waitFor("connected", () => sub.state().connected);
      let k = 10;
      while (sub.state().batches === 10 && k < 30) {
        a.publish(storedBatch([A_BLOCK + BigInt(k++)]));
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      // A gap, with a burst behind it: the live batches that queue behind the replay and
      // those in flight meanwhile overlap what the replay brings (at least the one that
      // showed the gap).
      a.dropNext(3);
      for (let i = 0; i < 40; i++) a.publish(storedBatch([A_BLOCK + BigInt(k++)]));
      const last = a.nextSeq - 1n;
      await waitFor("caught up", () => sub.state().lastSeq === last && sub.state().current, 2000);
      const s = sub.state();
      expect(s.gaps).toBeGreaterThanOrEqual(1); // the gap made here, and a slow joiner's
      expect(s.duplicates).toBeGreaterThanOrEqual(1);
      expect(Object.values(s.resets).every((n) => n === 0)).toBe(true);
      expect(index.of(W)).toEqual(range(k).map((i) => hex(A_BLOCK + BigInt(i))));
      expect(records.filter((r) => r.level === "error")).toEqual([]);
      expect(sub.saved()).not.toBeNull();
    });
  },
);
