/**
 * Warm restart end to end, real ZeroMQ: a router snapshots on shutdown; while it is down
 * the engines publish more and one engine restarts; the router restarts from the
 * snapshot. The unchanged engines are matched at once (before any replay) and catch up
 * only the new batches (replay from their saved seq + 1); the restarted engine is
 * cleared and refilled from its new stream. A damaged snapshot is refused: cold start.
 */

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { EnginePublisher } from "../src/engine/publisher.js";
import type { WireBatch } from "../src/protocol/event-encoder.js";
import {
  held,
  publisherWorkers,
  startTestService,
  streamOf,
  type TestService,
} from "./http-harness.js";
import { waitFor } from "./zmq-helpers.js";

const BS = 16;
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** Prompt `k` of engine `e` (4 blocks); hashes `base + i`. */
const prompt = (e: number, k: number) =>
  Array.from({ length: 4 * BS }, (_, i) => e * 1e6 + k * 1e3 + i);
const batch = (e: number, k: number, hashBase: bigint): WireBatch => ({
  ts: k,
  dpRank: null,
  events: [
    {
      type: "BlockStored",
      blockHashes: [0n, 1n, 2n, 3n].map((i) => hashBase + i),
      parentHash: null,
      tokenIds: prompt(e, k),
      blockSize: BS,
      loraId: null,
      medium: "GPU",
      loraName: null,
    },
  ],
});

async function engine(at?: EnginePublisher): Promise<EnginePublisher> {
  const p = await EnginePublisher.bind({
    endpoint: at?.endpoint ?? "tcp://127.0.0.1:*",
    replayEndpoint: at?.replayEndpoint ?? "tcp://127.0.0.1:*",
    topic: "kv",
  });
  cleanups.push(() => p.close());
  return p;
}

function config(path: string, pubs: EnginePublisher[]) {
  return {
    index: { blockSize: BS },
    snapshot: { path, intervalMs: 3_600_000 },
    events: { replayTimeoutMs: 2000 },
    workers: publisherWorkers(pubs, 18200),
  };
}

describe("warm restart from the router's snapshot", () => {
  it("keeps unchanged engines warm, catches up their new batches, clears the restarted one", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kvr-snap-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, "index.snap");
    const pubs = [await engine(), await engine(), await engine()];
    // Five buffered batches each before the first router starts.
    for (let e = 0; e < 3; e++)
      for (let k = 0; k < 5; k++) pubs[e]!.publish(batch(e, k, BigInt(e * 1000 + k * 10)));

    const first = await startTestService(config(path, pubs));
    cleanups.push(() => first.close());
    await waitFor("first router filled", () => first.index.stats().workerBlocks === 60);
    const scrape = async (svc: TestService) =>
      (await svc.app.inject({ method: "GET", url: "/metrics" })).body;
    expect(await scrape(first)).toContain("kvrouter_snapshot_age_seconds -1");
    const w = await first.snapshot!.write();
    const m = await scrape(first);
    expect(m).toContain("kvrouter_snapshot_writes_total 1");
    expect(m).toContain(`kvrouter_snapshot_size_bytes ${w!.bytes}`);
    expect(m).toMatch(/kvrouter_snapshot_last_write_duration_seconds \d/);
    expect(m).toMatch(/kvrouter_snapshot_last_success_timestamp_seconds \d/);
    expect(m).toContain(
      'kvrouter_snapshot_load_result{result="cold",source="none",reason="missing"} 1',
    );
    await first.close();
    expect(readFileSync(path).length).toBeGreaterThan(0);
    expect(first.logs.some((l) => l.msg === "index snapshot written")).toBe(true);

    // While the router is down: e0 and e1 publish 3 more; e2 restarts (fresh seqs, new blocks).
    for (let e = 0; e < 2; e++)
      for (let k = 5; k < 8; k++) pubs[e]!.publish(batch(e, k, BigInt(e * 1000 + k * 10)));
    for (const p of pubs) await p.flush();
    await pubs[2]!.close();
    const e2 = await engine(pubs[2]);
    for (let k = 0; k < 2; k++) e2.publish(batch(2, 100 + k, BigInt(90_000 + k * 10)));

    const second = await startTestService(config(path, [pubs[0]!, pubs[1]!, e2]));
    cleanups.push(() => second.close());
    // Warm at once: before any replay, e0 and e1 hold every saved prompt.
    for (let e = 0; e < 2; e++)
      for (let k = 0; k < 5; k++) expect(held(second, `e${e}`, prompt(e, k), BS)).toBe(4);
    expect(second.logs.some((l) => l.msg?.toString().startsWith("index snapshot restored"))).toBe(
      true,
    );
    expect(await scrape(second)).toContain(
      'kvrouter_snapshot_load_result{result="warm",source="file",reason="file"} 1',
    );

    await waitFor(
      "new batches caught up, e2 refilled",
      () =>
        [0, 1].every((e) => held(second, `e${e}`, prompt(e, 7), BS) === 4) &&
        held(second, "e2", prompt(2, 101), BS) === 4,
    );
    for (let e = 0; e < 2; e++) {
      for (let k = 0; k < 8; k++) expect(held(second, `e${e}`, prompt(e, k), BS)).toBe(4);
      const s = await streamOf(second, `e${e}`);
      expect(s.replayed_batches).toBe(3); // only seqs 5..7: the replay started at saved seq + 1
      expect(Object.values(s.resets as Record<string, number>).every((n) => n === 0)).toBe(true);
      expect(s.last_seq).toBe("7");
    }
    // e2's old blocks are gone (its stream is another one), its new ones are in.
    for (let k = 0; k < 5; k++) expect(held(second, "e2", prompt(2, k), BS)).toBe(0);
    expect((await streamOf(second, "e2")).resets.restart).toBe(1);
    expect(second.index.stats().workerBlocks).toBe(2 * 8 * 4 + 2 * 4);
  }, 30_000);

  it("refuses a damaged snapshot and starts cold (the rest of the index untouched)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kvr-snap-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, "index.snap");
    const pub = await engine();
    for (let k = 0; k < 3; k++) pub.publish(batch(0, k, BigInt(k * 10)));
    const first = await startTestService(config(path, [pub]));
    cleanups.push(() => first.close());
    await waitFor("filled", () => first.index.stats().workerBlocks === 12);
    await first.close();
    const bytes = readFileSync(path);
    bytes[Math.floor(bytes.length / 2)]! ^= 0xff;
    writeFileSync(path, bytes);

    const second = await startTestService(config(path, []));
    cleanups.push(() => second.close());
    expect(second.index.stats().nodes).toBe(0);
    const refusal = second.logs.find((l) => l.msg === "index snapshot refused, starting cold");
    expect(refusal?.reason).toBe("checksum");
    const m = (await second.app.inject({ method: "GET", url: "/metrics" })).body;
    expect(m).toContain(
      'kvrouter_snapshot_load_result{result="refused",source="file",reason="checksum"} 1',
    );
  }, 30_000);
});
