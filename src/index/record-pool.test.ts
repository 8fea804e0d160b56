/**
 * The index's growable storage (`record-pool.ts`, `holder-pool.ts`): words kept across
 * growths in place, free lists, the pools' limits (a pool fills its reservation, and one
 * found full mid-store leaves the index whole), and a stepped snapshot capture spoiled by
 * growth.
 */

import { afterEach, describe, expect, it, vi } from "vitest";
import { engineHashFromSafeInt } from "../protocol/engine-hash.js";
import { workerKey } from "../protocol/worker.js";
import { computeBlockKeys } from "./block-key.js";
import { HolderPool } from "./holder-pool.js";
import { RadixTreeIndex } from "./radix-tree.js";
import { GrowableWords, RecordPool } from "./record-pool.js";

const BS = 4;

/** `count` chained blocks of `worker` from id `first` (tokens derived from the id). */
function store(index: RadixTreeIndex, worker: string, first: number, count: number): void {
  const hashes = [];
  const tokens: number[] = [];
  for (let i = 0; i < count; i++) {
    hashes.push(engineHashFromSafeInt(first + i + 1));
    for (let t = 0; t < BS; t++) tokens.push((first + i) * BS + t);
  }
  index.applyEvent(workerKey(worker), {
    type: "stored",
    blockHashes: hashes,
    parentHash: null,
    tokenIds: tokens,
    blockSize: BS,
    loraId: null,
    loraName: null,
    medium: "GPU",
    tier: "gpu",
  });
}

describe("GrowableWords", () => {
  it("grows in place: the words are kept, the new ones are zero, views have a fixed length", () => {
    const g = new GrowableWords(100);
    const first = g.words;
    // A fixed-length view of a growable shared buffer (V8 compiles its accesses as a plain
    // array's), never a length-tracking view or a resizable (detachable) buffer.
    expect(first.buffer).toBeInstanceOf(SharedArrayBuffer);
    for (let i = 0; i < first.length; i++) first[i] = i ^ 0x5a5a5a5a;
    const n = first.length;
    expect(g.grow(5 * n * 4)).toBe(true);
    const grown = g.words;
    expect(grown.length).toBeGreaterThanOrEqual(5 * n);
    expect(g.byteLength).toBe(grown.byteLength);
    for (let i = 0; i < n; i++) expect(grown[i]).toBe((i ^ 0x5a5a5a5a) >>> 0);
    for (let i = n; i < grown.length; i += 997) expect(grown[i]).toBe(0);
    // The old view keeps its length and words (the buffer never detaches).
    expect(first.length).toBe(n);
    expect(first[n - 1]).toBe(((n - 1) ^ 0x5a5a5a5a) >>> 0);
    expect(g.grow(2 ** 33)).toBe(false);
  });

  it("a record pool keeps its records and free list across growths", () => {
    const pool = new RecordPool(6, 2, 16);
    const ids: number[] = [];
    for (let i = 0; i < 20_000; i++) {
      const id = pool.alloc();
      pool.rec.fill(i, id * 6, id * 6 + 6);
      ids.push(id);
      if (i % 7 === 3) {
        const k = ids.length >> 1;
        pool.free(ids[k]!);
        ids[k] = ids[ids.length - 1]!;
        ids.pop();
      }
    }
    expect(pool.live).toBe(ids.length);
    expect(new Set(ids).size).toBe(ids.length);
    let wrong = 0;
    const seen = new Set<number>();
    for (const id of ids) {
      const v = pool.rec[id * 6]!;
      if (seen.has(v)) wrong++;
      seen.add(v);
      for (let f = 0; f < 6; f++) if (pool.rec[id * 6 + f] !== v) wrong++;
    }
    expect(wrong).toBe(0);
  });

  it("a holder pool keeps its chunks across growths", () => {
    const pool = new HolderPool(4);
    const chunks: [number, number][] = [];
    for (let i = 0; i < 5_000; i++) {
      const size = 2 << (i % 5);
      const off = pool.alloc(size);
      pool.words.fill(i, off, off + size);
      chunks.push([off, i]);
    }
    expect(chunks.filter(([off, v]) => pool.words[off] !== v)).toEqual([]);
  });
});

describe("capture in steps", () => {
  it("a capture spoiled by events that grew the pools ends at once, and the next one is whole", () => {
    const index = new RadixTreeIndex({ blockSize: BS, initialCapacity: 16 });
    store(index, "a", 0, 200);
    const access = index.snapshotAccess();
    const job = access.beginCapture();
    expect(job.step(10)).toBe(true);
    // Enough new nodes and entries that both record pools grow while it is under way.
    for (let w = 0; w < 20; w++) store(index, `w${w}`, 10_000 * (w + 1), 500);
    expect(job.step(10)).toBe(false);
    expect(job.finish()).toBeNull();

    const again = access.beginCapture();
    while (again.step(1 << 12)) {}
    const whole = again.finish();
    expect(whole).not.toBeNull();
    const direct = index.snapshotAccess().capture();
    expect(Array.from(whole!.nodes)).toEqual(Array.from(direct.nodes));
    expect(Array.from(whole!.entries)).toEqual(Array.from(direct.entries));
  });
});

describe("pool limits", () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it("GrowableWords grows to the preferred size within its reservation, never past it", () => {
    const g = new GrowableWords(64, 1024);
    expect(g.grow(80, 400)).toBe(true);
    expect(g.byteLength).toBe(400);
    expect(g.grow(500, 4000)).toBe(true); // preferred past the reservation: all of it
    expect(g.byteLength).toBe(1024);
    const before = g.words;
    expect(g.grow(1028, 2000)).toBe(false); // the minimum itself does not fit: unchanged
    expect(g.words).toBe(before);
    expect(g.byteLength).toBe(1024);
  });

  it("a holder pool fills its whole reservation before it says it is full", () => {
    const pool = new HolderPool(16, 64);
    expect(pool.alloc(32)).toBe(0);
    expect(pool.alloc(16)).toBe(32);
    // 1.5 × 48 words is past the 64 reserved; the 8 asked for are not.
    expect(pool.alloc(8)).toBe(48);
    expect(pool.alloc(8)).toBe(56);
    expect(() => pool.alloc(2)).toThrow(/holder pool full/);
    pool.free(48, 8);
    expect(pool.alloc(8)).toBe(48);
  });

  it("a holder pool found full while a worker stores leaves no half entry behind", () => {
    const index = new RadixTreeIndex({ blockSize: BS, initialCapacity: 16 });
    store(index, "a", 0, 4);
    // b's first block needs a holder list beside a's: the pool refuses it.
    vi.spyOn(HolderPool.prototype, "alloc").mockImplementationOnce(() => {
      throw new RangeError("holder pool full (test)");
    });
    expect(() => store(index, "b", 0, 4)).toThrow(RangeError);
    vi.restoreAllMocks();
    // What the ingest path does after a throw: the worker is cleared, its entries reclaimed.
    index.removeWorker(workerKey("b"));
    while (index.reclaim()) {}
    expect(index.workerBlocks(workerKey("a"))).toBe(4);
    store(index, "c", 0, 4);
    const tokens = Array.from({ length: 4 * BS }, (_, t) => t);
    const found = index.findMatches(computeBlockKeys(tokens, BS, null)).workers;
    expect(found.map((w) => [w.worker, w.gpu])).toEqual([
      [workerKey("a"), 4],
      [workerKey("c"), 4],
    ]);
    expect(index.stats()).toMatchObject({ workers: 2, workerBlocks: 8 });
  });
});
