/**
 * A disconnect racing the messages of the connection it ends, over real ZeroMQ on
 * loopback: batches the old engine sent before it died, still unread in the SUB socket
 * when the subscriber handles the disconnect and the reconnect (a backlog: the router
 * applies slower than the engine published), must never be applied on top of the
 * restarted engine's stream (docs/ingestion.md, "The stream rules").
 */

import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { EnginePublisher } from "../src/engine/publisher.js";
import type { ApplyResult } from "../src/index/types.js";
import { DecodeThread } from "../src/ingest/decode-thread.js";
import { KvEventSubscriber } from "../src/ingest/kv-event-subscriber.js";
import type { KvEvent } from "../src/protocol/events.js";
import { type WorkerKey, workerKey } from "../src/protocol/worker.js";
import { freePortRange, hex, RecordingIndex, storedBatch, waitFor } from "./zmq-helpers.js";

const W = workerKey("w1", 0);

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A recording index whose applies take `slowMs` each: the router falls behind. */
class SlowIndex extends RecordingIndex {
  slowMs = 0;
  override applyEvent(worker: WorkerKey, event: KvEvent): ApplyResult {
    const until = performance.now() + this.slowMs;
    while (performance.now() < until) {
      // busy: an index under load
    }
    return super.applyEvent(worker, event);
  }
}

async function engine(p: number, replay: boolean): Promise<EnginePublisher> {
  const pub = await EnginePublisher.bind({
    endpoint: `tcp://127.0.0.1:${p}`,
    replayEndpoint: replay ? `tcp://127.0.0.1:${p + 1}` : null,
    topic: "kv-events",
  });
  cleanups.push(() => pub.close());
  return pub;
}

describe.each([
  [false, true],
  [true, true],
  [false, false],
  [true, false],
])("old-connection batches behind a restart (decodeThread: %s, replay: %s)", (threaded, replay) => {
  beforeAll(async () => {
    if (threaded) await DecodeThread.acquire().ready();
  });
  afterAll(() => DecodeThread.release());

  it("keeps only the restarted engine's blocks", async () => {
    const index = new SlowIndex();
    const p = await freePortRange(2);
    const first = await engine(p, replay);
    const sub = new KvEventSubscriber(
      {
        worker: W,
        endpoint: `tcp://127.0.0.1:${p}`,
        replayEndpoint: replay ? `tcp://127.0.0.1:${p + 1}` : null,
        topic: "kv-events",
        format: "vllm",
        replayTimeoutMs: 500,
        reconnectIntervalMs: 20,
        reconnectMaxIntervalMs: 40,
        decodeThread: threaded,
      },
      index,
    );
    cleanups.push(() => sub.close());
    await waitFor("connected", () => sub.state().connected);
    await new Promise((resolve) => setTimeout(resolve, 50)); // the subscription is in place
    index.slowMs = 1;
    const N = 400;
    for (let i = 1; i <= N; i++) first.publish(storedBatch([BigInt(i)]));
    await first.flush();
    // The batches sit in the router's SUB socket, read a few per millisecond.
    await waitFor("old engine's stream flowing", () => index.of(W).length > 0);
    await new Promise((resolve) => setTimeout(resolve, 30));
    await first.close();
    const second = await engine(p, replay);
    for (const h of [9001n, 9002n, 9003n]) second.publish(storedBatch([h]));
    const fresh = [9001n, 9002n, 9003n].map(hex);
    const resets = () => sub.state().resets.restart + sub.state().resets.unfilled_gap;
    await waitFor("reconnect handled", () => resets() > 0, 10_000);
    index.slowMs = 0;
    await waitFor("settled", () => !sub.state().replaying && sub.state().connected, 10_000);
    await new Promise((resolve) => setTimeout(resolve, 100)); // any old batch left is applied
    // The restarted engine holds at most its three blocks (it is quiet now): any other
    // block is one of the old engine's, applied after the reset that cleared them.
    expect(index.of(W).filter((h) => !fresh.includes(h))).toEqual([]);
    expect(sub.state().current).toBe(true);
  });
});
