/**
 * The decode thread's group buffers are handed back with the credit and reused, over
 * real ZeroMQ: a stream allocates a bounded number of buffer sets however many groups it
 * sends, the handed-back views are detached on the main thread, reused buffers carry
 * every later group intact, and the subscriber copies what its sequencer keeps of a
 * group (the last batch, which a snapshot saves and a reconnect compares) before the
 * buffers go back.
 */

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EnginePublisher } from "../src/engine/publisher.js";
import { RadixTreeIndex } from "../src/index/radix-tree.js";
import { DecodeThread, type LiveGroup, replyOf } from "../src/ingest/decode-thread.js";
import { KvEventSubscriber } from "../src/ingest/kv-event-subscriber.js";
import { encodeEventBatch } from "../src/protocol/event-encoder.js";
import { tapeEvent } from "../src/protocol/event-tape.js";
import { workerKey } from "../src/protocol/worker.js";
import { emptyBatch, hex, liveSocket, storedBatch, waitFor } from "./zmq-helpers.js";

let thread: DecodeThread;
beforeAll(async () => {
  thread = DecodeThread.acquire();
  await thread.ready();
});
afterAll(() => DecodeThread.release());

const socket = liveSocket;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Blocks per batch: enough that one batch fills a group past SMALL_GROUP_BYTES. */
const BLOCKS = 400;
/** Batch `n`: BLOCKS stored blocks with hashes derived from n (so each group differs). */
const batchOf = (n: number) =>
  storedBatch(Array.from({ length: BLOCKS }, (_, j) => BigInt(BLOCKS * n + j + 1)));
/** The first block hash of batch `n`. */
const firstOf = (n: number) => hex(BigInt(BLOCKS * n + 1));

describe("decode thread group buffers", () => {
  it("are handed back and reused: allocations stay bounded, later groups intact", async () => {
    const pub = await EnginePublisher.bind({ endpoint: "tcp://127.0.0.1:*", replayEndpoint: null });
    const allocated: number[] = [];
    const reused: boolean[] = [];
    /** The seqs of each group, to tell the rounds' groups from the warm-up's. */
    const groupSeqs: bigint[][] = [];
    const received: { seq: bigint; first: string; bytes: Buffer }[] = [];
    let detachedAfterHandBack = 0;
    const stream = thread.openStream(socket(pub.endpoint), {
      onGroup: (g: LiveGroup) => {
        allocated.push(g.allocated);
        reused.push(g.reuse);
        const seqs: bigint[] = [];
        groupSeqs.push(seqs);
        let s0 = 0;
        let p0 = 0;
        for (let i = 0; i < g.frameCounts.length; i++) {
          const seq = Buffer.from(g.seqBytes.subarray(s0, g.seqEnds[i]!)).readBigUInt64BE();
          seqs.push(seq);
          const bytes = Buffer.from(g.bytes.subarray(p0, g.ends[i]!)); // a copy
          const r = replyOf(g, i);
          const first = r?.ok && r.tape !== null && r.tape.events > 0 ? tapeEvent(r.tape, 0) : null;
          received.push({
            seq,
            first: first?.type === "stored" ? first.blockHashes[0]! : "",
            bytes,
          });
          s0 = g.seqEnds[i]!;
          p0 = g.ends[i]!;
        }
        thread.creditBack(stream, g);
        // Large groups go back (detached here); small ones are copies and stay.
        const detached = g.bytes.byteLength === 0 && g.arrays.tokens.byteLength === 0;
        if (detached === g.reuse) detachedAfterHandBack++;
      },
      onEvent: () => {},
      onOpened: () => {},
      onError: () => {},
      onLost: () => {},
    });
    await waitFor("live", () => {
      if (received.length === 0) pub.publish(emptyBatch());
      return received.length > 0;
    });
    const sent = new Map<bigint, { first: string; bytes: Uint8Array }>();
    // One batch per round, published once the previous one has arrived (and its group
    // was handed back): one group out at a time however slow the machine, so with reuse
    // the sets already made serve every round.
    for (let round = 0; round < 30; round++) {
      for (let k = 0; k < 3; k++) {
        const n = 3 * round + k;
        const bytes = encodeEventBatch(batchOf(n));
        const seq = pub.publishRaw(bytes);
        sent.set(seq, { first: firstOf(n), bytes });
        // By seq: a warm-up batch still on its way must not count as this one.
        await waitFor(`batch ${n}`, () => received.some((r) => r.seq === seq));
      }
    }
    await thread.closeStream(stream);
    await pub.close();

    // The rounds' groups: those holding a batch of the rounds. Warm-up probes still in
    // flight when the first arrived may come later, in small groups of their own.
    const isRound = groupSeqs.map((seqs) => seqs.some((q) => sent.has(q)));
    const groupsBefore = isRound.indexOf(true);
    expect(isRound.filter((o) => o).length).toBeGreaterThanOrEqual(90);
    // The rounds' 400-block batches are large groups; the warm-up's empty batches small.
    expect(reused.filter((_, i) => isRound[i]).every((r) => r)).toBe(true);
    expect(reused.filter((_, i) => !isRound[i]).some((r) => !r)).toBe(true);
    // Without reuse every group needs a fresh set (90 more). With it at most two: a credit
    // may reach the decode thread after its next flush, until two spare sets circulate.
    const before = groupsBefore === 0 ? 1 : allocated[groupsBefore - 1]!;
    expect(allocated.at(-1)! - before).toBeLessThanOrEqual(2);
    expect(detachedAfterHandBack).toBe(allocated.length);
    const first = [...sent.keys()][0]!;
    const ours = received.filter((r) => r.seq >= first);
    expect(ours.length).toBe(sent.size);
    for (const r of ours) {
      const s = sent.get(r.seq);
      expect(s, `seq ${r.seq}`).toBeDefined();
      expect(r.first).toBe(s!.first);
      expect(r.bytes.equals(Buffer.from(s!.bytes))).toBe(true);
    }
  });

  it("the subscriber keeps a copy of the last batch: its snapshot record survives reuse", async () => {
    const pub = await EnginePublisher.bind({
      endpoint: "tcp://127.0.0.1:*",
      replayEndpoint: "tcp://127.0.0.1:*",
      topic: "kv-events",
    });
    const worker = workerKey("w1", 0);
    const index = new RadixTreeIndex({ blockSize: 16 });
    const sub = new KvEventSubscriber(
      {
        worker,
        endpoint: pub.endpoint,
        replayEndpoint: pub.replayEndpoint,
        topic: "kv-events",
        format: "vllm",
        replayTimeoutMs: 1000,
        reconnectIntervalMs: 20,
        reconnectMaxIntervalMs: 100,
        decodeThread: true,
      },
      index,
    );
    try {
      const live = () => sub.state().batches - sub.state().replayedBatches > 0;
      await waitFor("live", () => {
        if (!live()) pub.publish(emptyBatch());
        return live();
      });
      let last: Uint8Array = new Uint8Array(0);
      for (let round = 0; round < 20; round++) {
        for (let k = 0; k < 3; k++) {
          last = encodeEventBatch(batchOf(3 * round + k));
          pub.publishRaw(last);
        }
        await sleep(5);
      }
      const lastSeq = pub.nextSeq - 1n;
      await waitFor("applied", () => sub.state().lastSeq === lastSeq && !sub.state().replaying);
      // Let the last group's hand-back run (it is queued after the group's batches).
      await sleep(20);
      const saved = sub.saved();
      expect(saved?.lastSeq).toBe(lastSeq);
      expect(Buffer.from(saved!.lastBatch).equals(Buffer.from(last))).toBe(true);
      expect(sub.state().resets).toEqual({
        restart: 0,
        unfilled_gap: 0,
        startup_hole: 0,
        replay_failed: 0,
        replay_mismatch: 0,
      });
    } finally {
      await sub.close();
      await pub.close();
    }
  });
});
