/**
 * A Mooncake store stream (topic "mooncake", seq from 1, no replay socket) through the
 * subscriber into the index, over real ZeroMQ on loopback.
 */

import { afterEach, describe, expect, it } from "vitest";
import { EnginePublisher } from "../src/engine/publisher.js";
import { KvEventSubscriber } from "../src/ingest/kv-event-subscriber.js";
import { engineHashFromString } from "../src/protocol/engine-hash.js";
import { encodeMooncakeBatch, type MooncakeWireEvent } from "../src/protocol/mooncake-encoder.js";
import { workerKey } from "../src/protocol/worker.js";
import { RecordingIndex, waitFor } from "./zmq-helpers.js";

const STORE = workerKey("store:mc", 0);
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const batch = (events: MooncakeWireEvent[]) =>
  encodeMooncakeBatch({ ts: 1_789_095_808.5, events }, { tsForm: "millis" });

const store = (key: string, hash: string, parent = ""): MooncakeWireEvent => ({
  type: "BlockStoreEvent",
  key,
  replicas: [["memory", "10.0.0.1:1234"]],
  modelName: "m",
  blockSize: 16,
  blockHash: hash,
  parentBlockHash: parent,
  tokenIds: Array.from({ length: 16 }, (_, i) => i + hash.length),
});

describe("Mooncake stream over ZeroMQ", () => {
  it("starts at seq 1 without a replay socket and applies store events for the holder", async () => {
    const pub = await EnginePublisher.bind({
      endpoint: "tcp://127.0.0.1:*",
      topic: "mooncake",
      firstSeq: 1n,
    });
    cleanups.push(() => pub.close());
    const index = new RecordingIndex();
    const sub = new KvEventSubscriber(
      {
        worker: STORE,
        endpoint: pub.endpoint,
        replayEndpoint: null,
        topic: "mooncake",
        format: "mooncake",
        reconnectIntervalMs: 20,
      },
      index,
    );
    cleanups.push(() => sub.close());
    // Probe until the subscription is live (the store has no replay to recover from).
    await waitFor("live", () => {
      pub.publishRaw(batch([]));
      return sub.state().batches > 0;
    });
    await waitFor("idle", () => sub.state().lastSeq === pub.nextSeq - 1n);
    const startupHoles = sub.state().resets.startup_hole;
    expect(startupHoles).toBeLessThanOrEqual(1); // 0 when seq 1 itself got through

    pub.publishRaw(batch([store("k1", "0xaa"), store("k2", "0xbb", "0xaa")]));
    pub.publishRaw(batch([store("k3", "0xcc", "0xbb")]));
    pub.publishRaw(batch([{ type: "BlockUpdateEvent", key: "k3", replicas: [] }]));
    pub.publishRaw(new Uint8Array([0x92, 0xc0])); // truncated: counted, skipped
    await waitFor("applied", () => sub.state().lastSeq === pub.nextSeq - 1n);

    expect(index.of(STORE)).toEqual(["0xaa", "0xbb"].map((h) => engineHashFromString(h)));
    const s = sub.state();
    expect(s.format).toBe("mooncake");
    expect(s.events["stored/applied"]).toBe(3);
    expect(s.events["removed/applied"]).toBe(1);
    expect(s.decodeErrors.not_msgpack).toBe(1);
    expect(s.resets).toEqual({
      restart: 0,
      unfilled_gap: 0,
      startup_hole: startupHoles,
      replay_failed: 0,
      replay_mismatch: 0,
    });
  });
});
