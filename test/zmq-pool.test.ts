/**
 * SubscriberPool over real ZeroMQ: data-parallel ranks on ports P + r, several workers
 * at once, removal.
 */

import { afterEach, describe, expect, it } from "vitest";
import { EnginePublisher } from "../src/engine/publisher.js";
import { SubscriberPool } from "../src/ingest/subscriber-pool.js";
import { workerKey } from "../src/protocol/worker.js";
import {
  emptyBatch,
  freePortRange,
  hex,
  RecordingIndex,
  storedBatch,
  waitFor,
} from "./zmq-helpers.js";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function pool(index: RecordingIndex): SubscriberPool {
  const p = new SubscriberPool(index, { replayTimeoutMs: 1000, reconnectIntervalMs: 20 });
  cleanups.push(() => p.close());
  return p;
}

/** Bind DP publishers for ranks 0..n-1 at P + r (events) and P + n + r (replay). */
async function dpPublishers(n: number): Promise<{ base: number; pubs: EnginePublisher[] }> {
  for (let attempt = 0; ; attempt++) {
    const base = await freePortRange(2 * n);
    const pubs: EnginePublisher[] = [];
    try {
      for (let rank = 0; rank < n; rank++) {
        pubs.push(
          await EnginePublisher.bind({
            endpoint: `tcp://127.0.0.1:${base}`,
            replayEndpoint: `tcp://127.0.0.1:${base + n}`,
            dataParallelRank: rank,
            topic: "kv-events",
          }),
        );
      }
      for (const p of pubs) cleanups.push(() => p.close());
      return { base, pubs };
    } catch (err) {
      await Promise.all(pubs.map((p) => p.close()));
      if (attempt >= 5) throw err; // another process took a port meanwhile: pick again
    }
  }
}

describe("SubscriberPool", () => {
  it("subscribes every data-parallel rank at port P + r and keeps their caches apart", async () => {
    const index = new RecordingIndex();
    const { base, pubs } = await dpPublishers(2);
    expect(pubs.map((p) => p.endpoint)).toEqual([
      `tcp://127.0.0.1:${base}`,
      `tcp://127.0.0.1:${base + 1}`,
    ]);
    const p = pool(index);
    const keys = p.add({
      workerId: "dp",
      eventsEndpoint: `tcp://127.0.0.1:${base}`,
      replayEndpoint: `tcp://127.0.0.1:${base + 2}`,
      topic: "kv-events",
      dataParallelSize: 2,
      format: "vllm",
    });
    expect(keys).toEqual([workerKey("dp", 0), workerKey("dp", 1)]);
    // Published before the SUBs are live: the first-contact replay recovers them.
    pubs[0]!.publish(storedBatch([1n, 2n]));
    pubs[1]!.publish(storedBatch([7n]));
    pubs[0]!.publish(storedBatch([3n], 2n));
    await waitFor(
      "both ranks",
      () => index.of("dp#0").length === 3 && index.of("dp#1").length === 1,
    );
    expect(index.of("dp#0")).toEqual([1n, 2n, 3n].map(hex));
    expect(index.of("dp#1")).toEqual([hex(7n)]);
    const states = p.states();
    expect(states.map((s) => [s.worker, s.endpoint, s.replayEndpoint])).toEqual([
      ["dp#0", `tcp://127.0.0.1:${base}`, `tcp://127.0.0.1:${base + 2}`],
      ["dp#1", `tcp://127.0.0.1:${base + 1}`, `tcp://127.0.0.1:${base + 3}`],
    ]);
    expect(states.every((s) => s.dpRankMismatches === 0)).toBe(true);
  });

  it("runs several workers at once and forgets a removed one", async () => {
    const index = new RecordingIndex();
    const p = pool(index);
    const pubs = await Promise.all(
      [0, 1, 2].map((i) =>
        EnginePublisher.bind({
          endpoint: "tcp://127.0.0.1:*",
          replayEndpoint: i === 2 ? null : "tcp://127.0.0.1:*",
          topic: `t${i}`,
        }),
      ),
    );
    for (const pub of pubs) cleanups.push(() => pub.close());
    pubs.forEach((pub, i) => {
      p.add({
        workerId: `w${i}`,
        eventsEndpoint: pub.endpoint,
        replayEndpoint: pub.replayEndpoint,
        topic: `t${i}`,
        dataParallelSize: 1,
        format: "vllm",
      });
    });
    expect(() =>
      p.add({
        workerId: "w0",
        eventsEndpoint: pubs[0]!.endpoint,
        replayEndpoint: null,
        topic: "",
        dataParallelSize: 1,
        format: "vllm",
      }),
    ).toThrow(/already/);
    // Publish until each worker has 20 blocks of its own (w2 has no replay: it may miss
    // the first batches while its SUB joins, so it keeps receiving until full).
    const want = (i: number) => Array.from({ length: 20 }, (_, j) => hex(BigInt(i * 1000 + j)));
    for (let round = 0; round < 20; round++) {
      pubs.forEach((pub, i) => {
        if (i < 2) pub.publish(storedBatch([BigInt(i * 1000 + round)]));
      });
    }
    const w2 = () => p.states().find((st) => st.worker === "w2#0")!;
    await waitFor("w2 live", () => {
      pubs[2]!.publish(emptyBatch());
      return w2().batches > 0;
    });
    await waitFor("w2 idle", () => w2().lastSeq === pubs[2]!.nextSeq - 1n);
    for (let j = 0; j < 20; j++) pubs[2]!.publish(storedBatch([BigInt(2000 + j)]));
    await waitFor("all workers", () => [0, 1, 2].every((i) => index.of(`w${i}#0`).length >= 20));
    for (const i of [0, 1, 2]) expect(index.of(`w${i}#0`)).toEqual(want(i));

    expect(await p.remove("w1")).toBe(true);
    expect(await p.remove("w1")).toBe(false);
    expect(index.of("w1#0")).toEqual([]);
    expect(p.has("w1")).toBe(false);
    expect(p.states().map((s) => s.worker)).toEqual(["w0#0", "w2#0"]);
    pubs[1]!.publish(storedBatch([99n]));
    pubs[0]!.publish(storedBatch([20n]));
    await waitFor("w0 still live", () => index.of("w0#0").length === 21);
    expect(index.of("w1#0")).toEqual([]);
  });

  it("rejects bad worker declarations before opening sockets", () => {
    const p = pool(new RecordingIndex());
    const base = {
      workerId: "x",
      eventsEndpoint: "ipc:///tmp/nope",
      replayEndpoint: null,
      topic: "",
      format: "vllm" as const,
    };
    expect(() => p.add({ ...base, dataParallelSize: 0 })).toThrow(/dataParallelSize/);
    expect(() => p.add({ ...base, dataParallelSize: 2 })).toThrow(/no tcp port/);
    expect(p.states()).toEqual([]);
  });
});
