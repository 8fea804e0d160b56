/**
 * The decode thread on its own, against a real EnginePublisher over ZeroMQ: the worker
 * (loaded from .ts here, through the tsx bootstrap) owns the SUB socket and sends
 * groups in arrival order, with a tape per integer-hash batch, the objects for a
 * binary-hash batch, the error for an undecodable payload, the frame count of a
 * malformed message, and the socket's connect event. Closing releases the socket.
 * Without credits the worker stops (four groups waiting, and the one being collected),
 * and credits let more through once fewer than four groups wait.
 */

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EnginePublisher } from "../src/engine/publisher.js";
import { DecodeThread, type LiveGroup, replyOf } from "../src/ingest/decode-thread.js";
import { encodeEventBatch } from "../src/protocol/event-encoder.js";
import { tapeEvent } from "../src/protocol/event-tape.js";
import { emptyBatch, hex, liveSocket, storedBatch, waitFor } from "./zmq-helpers.js";

let thread: DecodeThread;
beforeAll(() => {
  thread = DecodeThread.acquire();
});
afterAll(() => DecodeThread.release());

const socket = liveSocket;

describe("DecodeThread", () => {
  it("receives and decodes a stream on the worker, in order, with its socket events", async () => {
    const pub = await EnginePublisher.bind({ endpoint: "tcp://127.0.0.1:*", replayEndpoint: null });
    const groups: LiveGroup[] = [];
    const events: string[] = [];
    const stream = thread.openStream(socket(pub.endpoint), {
      onGroup: (g) => {
        groups.push(g);
        thread.credit(stream);
      },
      onEvent: (name) => events.push(name),
      onOpened: () => events.push("opened"),
      onError: (message) => events.push(`error ${message}`),
      onLost: () => events.push("lost"),
    });
    expect(stream).toBeGreaterThanOrEqual(0);
    // Slow joiner: probe until something arrives. The socket's connect event and its
    // first message reach the thread by separate paths (the monitor and the receive
    // loop), so either may be posted first: wait for both, then check what is ordered.
    await waitFor("live", () => {
      if (groups.length === 0) pub.publish(emptyBatch());
      return groups.length > 0 && events.includes("connect");
    });
    expect(events[0]).toBe("opened");
    expect(events.filter((e) => e !== "opened" && e !== "connect")).toEqual([]);
    const messages = () => groups.flatMap((g) => g.frameCounts.map((_, i) => ({ g, i })));
    const seqOf = ({ g, i }: { g: LiveGroup; i: number }) =>
      Buffer.from(g.seqBytes.subarray(i === 0 ? 0 : g.seqEnds[i - 1]!, g.seqEnds[i]!));
    const seq = pub.publish(storedBatch([1n, 2n], 9n));
    pub.publish({
      ...storedBatch([3n]),
      events: [{ type: "BlockRemoved", blockHashes: [3n], medium: null }],
    });
    pub.publishRaw(new Uint8Array([0xc1]));
    const binary = encodeEventBatch(storedBatch([4n]), { hashForm: "binary" });
    pub.publishRaw(binary);
    // Probes still in flight when the first group arrived may come before these four: the
    // four start at the message whose seq is `seq` (the malformed one has a seq frame too).
    const from = () =>
      messages().findIndex(
        (m) =>
          m.g.frameCounts[m.i] === 3 && seqOf(m).length === 8 && seqOf(m).readBigUInt64BE() === seq,
      );
    await waitFor("4 more", () => from() >= 0 && messages().length >= from() + 4);
    expect(messages().length).toBe(from() + 4); // and nothing else after them
    const [a, b, c, d] = messages().slice(from());
    const ra = replyOf(a!.g, a!.i);
    if (ra === null || !ra.ok || ra.tape === null) throw new Error("expected a tape");
    expect(tapeEvent(ra.tape, 0)).toMatchObject({
      type: "stored",
      blockHashes: [hex(1n), hex(2n)],
      parentHash: hex(9n),
    });
    expect(seqOf(a!).readBigUInt64BE()).toBe(seq);
    const rb = replyOf(b!.g, b!.i);
    expect(rb?.ok && rb.tape !== null && tapeEvent(rb.tape, 0)).toMatchObject({
      type: "removed",
      blockHashes: [hex(3n)],
    });
    expect(replyOf(c!.g, c!.i)).toMatchObject({ ok: false, error: { code: "not_msgpack" } });
    const rd = replyOf(d!.g, d!.i);
    expect(rd).toMatchObject({ ok: true, tape: null, batch: { events: [{ type: "stored" }] } });
    // The payload bytes come along, as sent.
    const dEnd = d!.g.ends[d!.i]!;
    const dStart = d!.i === 0 ? 0 : d!.g.ends[d!.i - 1]!;
    expect(Buffer.from(d!.g.bytes.subarray(dStart, dEnd)).equals(Buffer.from(binary))).toBe(true);
    await thread.closeStream(stream);
    await pub.close();
    expect(events).toEqual(["opened", "connect"]);
  });

  it("stops without credits, and a credit lets more through", async () => {
    const pub = await EnginePublisher.bind({ endpoint: "tcp://127.0.0.1:*", replayEndpoint: null });
    const groups: LiveGroup[] = [];
    let connected = false;
    const stream = thread.openStream(socket(pub.endpoint), {
      onGroup: (g) => groups.push(g),
      onEvent: (name) => {
        if (name === "connect") connected = true;
      },
      onOpened: () => {},
      onError: () => {},
      onLost: () => {},
    });
    await waitFor("connected", () => connected);
    // Spaced messages: each is a group of its own (one per worker loop turn).
    const pause = () => new Promise((r) => setTimeout(r, 20));
    for (let i = 0; i < 12 && groups.length < 4; i++) {
      pub.publish(emptyBatch());
      await pause();
    }
    await waitFor("4 groups", () => groups.length >= 4);
    for (let i = 0; i < 6; i++) {
      pub.publish(emptyBatch());
      await pause();
    }
    // Four groups wait for a credit, and the one being collected when the fourth went
    // out is sent too; then the worker reads no more. (Waited for, not assumed sent
    // within the pauses: a loaded machine may deliver the fifth later.)
    await waitFor("the fifth group", () => groups.length >= 5);
    const stalled = groups.length;
    expect(stalled).toBe(5);
    await pause();
    expect(groups.length).toBe(stalled);
    // Five out, one credited: still four waiting, nothing read.
    thread.credit(stream);
    await pause();
    await pause();
    expect(groups.length).toBe(stalled);
    // A second credit wakes the waiting worker: the withheld messages come through.
    thread.credit(stream);
    await waitFor("more groups", () => groups.length > stalled);
    for (let i = 0; i < 10; i++) thread.credit(stream);
    const received = () => groups.reduce((n, g) => n + g.frameCounts.length, 0);
    await waitFor("the rest", () => received() >= stalled + 6 - 1);
    await thread.closeStream(stream);
    await pub.close();
  });
});
