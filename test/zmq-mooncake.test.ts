/**
 * A Mooncake store stream (topic "mooncake", seq from 1, no replay socket) through the
 * subscriber into the index, over real ZeroMQ on loopback.
 */

import { afterEach, describe, expect, it } from "vitest";
import { EnginePublisher } from "../src/engine/publisher.js";
import { RadixTreeIndex } from "../src/index/radix-tree.js";
import { KvEventSubscriber } from "../src/ingest/kv-event-subscriber.js";
import { InFlightTracker } from "../src/load/in-flight.js";
import { LoadTracker } from "../src/load/load-tracker.js";
import { WorkerRegistry } from "../src/load/worker-registry.js";
import { engineHashFromString, engineHashInModel } from "../src/protocol/engine-hash.js";
import { encodeMooncakeBatch, type MooncakeWireEvent } from "../src/protocol/mooncake-encoder.js";
import { workerKey } from "../src/protocol/worker.js";
import { Router } from "../src/router.js";
import { resolveSchedulerConfig } from "../src/scheduler/config.js";
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

/** A Mooncake store publisher (seq from 1, no replay) and a subscriber into `index`, live. */
async function storeStream<I extends ConstructorParameters<typeof KvEventSubscriber>[1]>(index: I) {
  const pub = await EnginePublisher.bind({
    endpoint: "tcp://127.0.0.1:*",
    topic: "mooncake",
    firstSeq: 1n,
  });
  cleanups.push(() => pub.close());
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
  return { pub, sub };
}

describe("Mooncake stream over ZeroMQ", () => {
  it("starts at seq 1 without a replay socket and applies store events for the holder", async () => {
    const index = new RecordingIndex();
    const { pub, sub } = await storeStream(index);
    await waitFor("idle", () => sub.state().lastSeq === pub.nextSeq - 1n);
    const startupHoles = sub.state().resets.startup_hole;
    expect(startupHoles).toBeLessThanOrEqual(1); // 0 when seq 1 itself got through

    pub.publishRaw(batch([store("k1", "0xaa"), store("k2", "0xbb", "0xaa")]));
    pub.publishRaw(batch([store("k3", "0xcc", "0xbb")]));
    pub.publishRaw(batch([{ type: "BlockUpdateEvent", key: "k3", replicas: [] }]));
    pub.publishRaw(new Uint8Array([0x92, 0xc0])); // truncated: counted, skipped
    await waitFor("applied", () => sub.state().lastSeq === pub.nextSeq - 1n);

    // Stored for model "m": held under the model's hashes (a store keeps models apart).
    expect(index.of(STORE)).toEqual(
      ["0xaa", "0xbb"].map((h) => engineHashInModel("m", engineHashFromString(h))),
    );
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

/**
 * A real store stream into a real index, read by a real router: engines `a`, `b` with
 * the given models, the store `store:mc` registered with `storeModel`.
 */
async function storeFleet(engines: readonly (string | null)[], storeModel: string | null) {
  const index = new RadixTreeIndex({ blockSize: 16 });
  const { pub, sub } = await storeStream(index);
  const registry = new WorkerRegistry();
  for (const [i, model] of engines.entries()) {
    registry.upsert({
      workerId: "ab"[i]!,
      url: `http://127.0.0.1:9/${i}`,
      kind: "vllm",
      blockSize: 16,
      model,
    });
  }
  registry.upsert({
    workerId: "store:mc",
    url: "http://127.0.0.1:9/store",
    kind: "mooncake-store",
    blockSize: 16,
    model: storeModel,
  });
  const router = new Router({
    index,
    registry,
    loads: new LoadTracker({ staleAfterMs: 1000 }),
    inFlight: new InFlightTracker({ prefillTtlMs: 10_000, ttlMs: 60_000 }),
    config: resolveSchedulerConfig({ weights: { queue: 0 }, outlierStdK: Infinity }),
    rng: () => 0,
  });
  /** Publish `blocks` chained 16-token blocks of `tokens`, stored for `model` ("" = unset). */
  const publish = async (tokens: readonly number[], blocks: number, model: string) => {
    const events: MooncakeWireEvent[] = [];
    for (let b = 0; b < blocks; b++) {
      events.push({
        type: "BlockStoreEvent",
        key: `${model}/k${b}`,
        replicas: [["memory", "10.0.0.1:1234"]],
        modelName: model,
        blockSize: 16,
        blockHash: `0x${(b + 1).toString(16)}`,
        parentBlockHash: b === 0 ? "" : `0x${b.toString(16)}`,
        tokenIds: tokens.slice(16 * b, 16 * b + 16),
      });
    }
    pub.publishRaw(batch(events));
    await waitFor("applied", () => sub.state().lastSeq === pub.nextSeq - 1n);
  };
  /** The store overlap a route and a match report for a request of `model`. */
  const storeFor = (tokens: readonly number[], model?: string) => {
    const req = { tokenIds: tokens, ...(model === undefined ? {} : { model }) };
    const r = router.route(req, 0);
    if (!r.ok) throw new Error(r.error.message);
    const routed = new Set(r.decision.candidates.map((c) => c.overlap.store));
    expect(routed.size).toBe(1);
    expect(router.match(req).store).toBe([...routed][0]);
    return [...routed][0];
  };
  return { publish, storeFor, sub };
}

const PROMPT = Array.from({ length: 16 * 4 + 5 }, (_, i) => 7000 + i);

describe("a Mooncake store holding several models' KV", () => {
  it("credits a request only with blocks stored for its own model", async () => {
    // Same tokenizer, same prompt, same hash function: identical keys for both models.
    const f = await storeFleet(["m1", "m2"], null);
    await f.publish(PROMPT, 3, "m2");
    expect(f.sub.state().events["stored/applied"]).toBe(3);
    expect(f.storeFor(PROMPT, "m2")).toBe(3);
    // m2's KV is useless to m1: no store overlap, although the keys are the same.
    expect(f.storeFor(PROMPT, "m1")).toBe(0);
    // No model named, in a fleet of two models: it may run on either, so m2's KV is no hit.
    expect(f.storeFor(PROMPT)).toBe(0);
    await f.publish(PROMPT, 2, "m1");
    expect(f.storeFor(PROMPT, "m1")).toBe(2);
    expect(f.storeFor(PROMPT, "m2")).toBe(3);
  });

  it("keeps a store configured with another model's blocks out of every request", async () => {
    const f = await storeFleet(["m1", "m2"], "m1");
    await f.publish(PROMPT, 3, "m2"); // contradicts the store's configured model
    await f.publish(PROMPT, 1, ""); // unset: the configured model's
    expect(f.storeFor(PROMPT, "m1")).toBe(1);
    expect(f.storeFor(PROMPT, "m2")).toBe(0);
    expect(f.storeFor(PROMPT)).toBe(0);
  });

  it("does not credit blocks of unknown model to a request naming a model", async () => {
    const f = await storeFleet(["m1", null], null);
    await f.publish(PROMPT, 3, "");
    expect(f.storeFor(PROMPT, "m1")).toBe(0);
    // Nothing known on either side: as before.
    expect(f.storeFor(PROMPT)).toBe(3);
  });
});

describe("a Mooncake store holding one model's KV", () => {
  // The same answers as before stores were indexed per model.
  for (const storeModel of ["m", null]) {
    it(`counts its blocks for that model's requests (store model ${storeModel})`, async () => {
      const f = await storeFleet(["m", "m"], storeModel);
      await f.publish(PROMPT, 3, "m");
      expect(f.storeFor(PROMPT, "m")).toBe(3);
      // No model named, every engine serves m: the request runs as m wherever it goes.
      expect(f.storeFor(PROMPT)).toBe(3);
      expect(f.storeFor(PROMPT.slice(0, 40), "m")).toBe(2);
      const other = PROMPT.map((t) => t + 1);
      expect(f.storeFor(other, "m")).toBe(0);
    });
  }

  it("counts unnamed blocks for every request when nothing names a model", async () => {
    const f = await storeFleet([null, null], null);
    await f.publish(PROMPT, 3, "");
    expect(f.storeFor(PROMPT)).toBe(3);
    expect(f.storeFor(PROMPT.slice(0, 40))).toBe(2);
  });
});
