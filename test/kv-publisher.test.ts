/**
 * The custom-engine publisher (`kvrouter/engine`'s `KvEventPublisher`) on real ZeroMQ
 * sockets: its bytes are the wire-formats §7 vLLM vectors byte for byte, seqs count from
 * 0, the replay ROUTER returns what was published, and the DP rank is carried and used
 * for the port offset.
 */

import { afterEach, describe, expect, it } from "vitest";
import { KvEventPublisher } from "../src/engine/index.js";
import { engineHashFromBigInt } from "../src/protocol/engine-hash.js";
import { decodeEventBatch } from "../src/protocol/vllm-codec.js";
import { ReplayClient } from "../src/transport/replay-client.js";
import { VECTOR_REMOVED_HASH, VECTOR_TS, VECTORS } from "./fixtures/wire-vectors.js";
import { freePortRange } from "./zmq-helpers.js";

const open: KvEventPublisher[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((p) => p.close()));
});

async function publisher(extra: { dataParallelRank?: number; base?: number } = {}) {
  const base = extra.base;
  const p = await KvEventPublisher.bind({
    endpoint: base === undefined ? "tcp://127.0.0.1:*" : `tcp://127.0.0.1:${base}`,
    replayEndpoint: base === undefined ? "tcp://127.0.0.1:*" : `tcp://127.0.0.1:${base + 10}`,
    blockSize: 2,
    clock: () => VECTOR_TS,
    ...(extra.dataParallelRank === undefined ? {} : { dataParallelRank: extra.dataParallelRank }),
  });
  open.push(p);
  return p;
}

/** Ask the replay ROUTER for every batch from `from` (the router's own replay client). */
async function replay(endpoint: string, from: bigint): Promise<[bigint, Buffer][]> {
  const client = new ReplayClient({ endpoint, timeoutMs: 5000 });
  const out: [bigint, Buffer][] = [];
  try {
    const outcome = await client.request(from, (seq, payload) => {
      out.push([seq, Buffer.from(payload)]);
      return true;
    });
    expect(outcome.status).toBe("complete");
    return out;
  } finally {
    client.close();
  }
}

const hexOf = (b: Uint8Array) => Buffer.from(b).toString("hex");

describe("KvEventPublisher", () => {
  it("sends vLLM's bytes: the §7 removedMap and clearedMap vectors, seqs from 0", async () => {
    const p = await publisher();
    expect(p.publishRemoved([VECTOR_REMOVED_HASH])).toBe(0n);
    expect(p.publishCleared()).toBe(1n);
    // Signed form of the same 64 bits (as a Python engine holds it): the same bytes.
    expect(p.publishRemoved([VECTOR_REMOVED_HASH - (1n << 64n)], { medium: "GPU" })).toBe(2n);
    await p.flush();
    const got = await replay(p.replayEndpoint!, 0n);
    expect(got.map(([seq]) => seq)).toEqual([0n, 1n, 2n]);
    expect(hexOf(got[0]![1])).toBe(hexOf(VECTORS.removedMap));
    expect(hexOf(got[1]![1])).toBe(hexOf(VECTORS.clearedMap));
    expect(hexOf(got[2]![1])).toBe(hexOf(VECTORS.removedMap));
  });

  it("publishes stored blocks the router's vLLM decoder reads back exactly", async () => {
    const p = await publisher();
    p.publishStored([1n, -2n], null, [1, 2, 3, 4], { loraName: "ad", medium: "CPU" });
    p.publishStored([3], 1n, [5, 6]);
    await p.flush();
    const got = await replay(p.replayEndpoint!, 1n);
    expect(got.map(([seq]) => seq)).toEqual([1n]);
    const all = await replay(p.replayEndpoint!, 0n);
    const first = decodeEventBatch(all[0]![1], { fieldOrder: "vllm" });
    expect(first.ok && first.skipped).toEqual({ unknownTag: 0, nonMainGroup: 0, unknownKeys: 0 });
    if (!first.ok) throw new Error(first.error.message);
    expect(first.batch.dpRank).toBe(0);
    expect(first.batch.ts).toBe(VECTOR_TS);
    expect(first.batch.events[0]).toMatchObject({
      type: "stored",
      blockHashes: [engineHashFromBigInt(1n), engineHashFromBigInt(-2n)],
      parentHash: null,
      tokenIds: new Uint32Array([1, 2, 3, 4]),
      blockSize: 2,
      loraName: "ad",
      medium: "CPU",
      tier: "host",
    });
    const second = decodeEventBatch(all[1]![1], { fieldOrder: "vllm" });
    if (!second.ok) throw new Error(second.error.message);
    expect(second.batch.events[0]).toMatchObject({
      parentHash: engineHashFromBigInt(1n),
      medium: "GPU",
      tier: "gpu",
      loraName: null,
    });
  });

  it("binds rank r at the base ports + r and writes r into every batch", async () => {
    const base = await freePortRange(12);
    const p = await publisher({ dataParallelRank: 1, base });
    expect(p.endpoint).toBe(`tcp://127.0.0.1:${base + 1}`);
    expect(p.replayEndpoint).toBe(`tcp://127.0.0.1:${base + 11}`);
    p.publishCleared();
    await p.flush();
    const [[, payload]] = (await replay(p.replayEndpoint!, 0n)) as [[bigint, Buffer]];
    const decoded = decodeEventBatch(payload);
    expect(decoded.ok && decoded.batch.dpRank).toBe(1);
  });

  it("refuses events that would corrupt the index, at the call", async () => {
    const p = await publisher();
    expect(() => p.publishStored([1n], null, [1, 2, 3])).toThrow(/3 tokens, expected 1 blocks × 2/);
    expect(() => p.publishStored([], null, [])).toThrow(/empty/);
    expect(() => p.publishRemoved([1n << 64n])).toThrow(/does not fit 64 bits/);
    expect(() => p.publishRemoved([2 ** 60])).toThrow(/not a safe integer/);
    expect(() => p.publishStored([1n], null, [1, -1])).toThrow(/tokenIds\[1\]/);
    expect(p.nextSeq).toBe(0n); // nothing was published
  });
});
