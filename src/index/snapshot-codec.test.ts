import { describe, expect, it } from "vitest";
import {
  type EngineBlockHash,
  engineHashFromSafeInt,
  engineHashFromString,
} from "../protocol/engine-hash.js";
import { type KvEvent, tierOfMedium } from "../protocol/events.js";
import { workerKey } from "../protocol/worker.js";
import { computeBlockKeys } from "./block-key.js";
import { RadixTreeIndex } from "./radix-tree.js";
import {
  captureSnapshot,
  decodeSnapshot,
  encodeSnapshot,
  restoreSnapshot,
  type SavedStream,
  SNAPSHOT_VERSION,
} from "./snapshot-codec.js";

const BS = 4;
const W = [workerKey("a"), workerKey("b"), workerKey("c"), workerKey("s")];

function stored(
  hashes: EngineBlockHash[],
  parent: EngineBlockHash | null,
  tokenIds: number[],
  medium: string | null = null,
): KvEvent {
  return {
    type: "stored",
    blockHashes: hashes,
    parentHash: parent,
    tokenIds,
    blockSize: BS,
    loraId: null,
    loraName: null,
    medium,
    tier: tierOfMedium(medium),
  };
}

/** Prompts: 30 conversations of 6 blocks sharing 2 system-prompt blocks in 3 groups. */
const prompts: number[][] = [];
for (let c = 0; c < 30; c++) {
  const p: number[] = [];
  for (let b = 0; b < 6; b++) p.push(...(b < 2 ? [c % 3, b, 7, 7] : [c, b, 1, 2]));
  prompts.push(p);
}

/** A tree with int and string hashes, tiers, removals, a copy and a cleared worker. */
function build(): RadixTreeIndex {
  const t = new RadixTreeIndex({ blockSize: BS });
  let next = 1;
  for (let c = 0; c < prompts.length; c++) {
    const w = W[c % 3]!;
    const hashes = Array.from({ length: 6 }, () => engineHashFromSafeInt(next++));
    t.applyEvent(w, stored(hashes, null, prompts[c]!));
    if (c % 4 === 0) t.applyEvent(w, stored(hashes.slice(0, 3), null, [], "cpu"));
    if (c % 5 === 0) {
      t.applyEvent(w, { type: "removed", blockHashes: hashes.slice(4), medium: null, tier: "gpu" });
    }
    if (c === 1) t.applyEvent(w, stored(hashes.slice(0, 1), null, prompts[c]!.slice(0, BS)));
    // The store holder names its blocks by strings (Mooncake).
    const s = prompts[c]!.slice(0, 12);
    t.applyEvent(
      W[3]!,
      stored(
        [0, 1, 2].map((i) => engineHashFromString(`k${c}-${i}`)),
        null,
        s,
      ),
    );
  }
  t.applyEvent(
    workerKey("gone"),
    stored([engineHashFromSafeInt(999)], null, prompts[0]!.slice(0, 4)),
  );
  t.applyEvent(workerKey("gone"), { type: "cleared" });
  return t;
}

/** Matches of every prompt (workers holding nothing are left out: a restore omits them). */
const matches = (t: RadixTreeIndex) =>
  prompts.map((p) =>
    t.findMatches(computeBlockKeys(p, BS, null)).workers.filter((m) => m.totalBlocks > 0),
  );

function fileOf(t: RadixTreeIndex, streams: SavedStream[] = []): Uint8Array {
  const parts = [...encodeSnapshot(captureSnapshot(t.snapshotAccess(), streams, 1))];
  return new Uint8Array(Buffer.concat(parts));
}

describe("index snapshot", () => {
  it("restores an index that matches exactly like the original, and keeps the stream records", () => {
    const t = build();
    const streams = [{ worker: W[0]!, lastSeq: 41n, lastBatch: new Uint8Array([1, 2, 3]) }];
    const dec = decodeSnapshot(fileOf(t, streams), BS);
    if (!dec.ok) throw new Error(dec.message);
    const r = new RadixTreeIndex({ blockSize: BS });
    restoreSnapshot(r.snapshotAccess(), dec.snapshot);
    expect(matches(r)).toEqual(matches(t));
    const { outcomes: _a, ...rs } = r.stats();
    const { outcomes: _b, reclaimPendingBlocks: _c, ...ts } = t.stats();
    // "gone" was cleared: it holds nothing and is not saved.
    expect({ ...rs, reclaimPendingBlocks: 0 }).toEqual({
      ...ts,
      workers: ts.workers - 1,
      reclaimPendingBlocks: 0,
    });
    expect(
      r.findMatches(computeBlockKeys(prompts[0]!, BS, null)).workers.map((m) => m.worker),
    ).not.toContain(workerKey("gone"));
    expect(dec.snapshot.streams).toEqual(streams);
    // Later events resolve against restored hashes: removals (and the extra copy) apply.
    const h1 = engineHashFromSafeInt(7); // conversation 1's first block, stored twice
    for (const x of [t, r])
      x.applyEvent(W[1]!, { type: "removed", blockHashes: [h1], medium: null, tier: "gpu" });
    expect(matches(r)).toEqual(matches(t));
    for (const x of [t, r])
      x.applyEvent(W[1]!, { type: "removed", blockHashes: [h1], medium: null, tier: "gpu" });
    expect(matches(r)).toEqual(matches(t));
    const sh = [0, 1, 2].map((i) => engineHashFromString(`k3-${i}`));
    for (const x of [t, r])
      x.applyEvent(W[3]!, { type: "removed", blockHashes: sh, medium: null, tier: "gpu" });
    expect(matches(r)).toEqual(matches(t));
  });

  it("restores only the workers asked for, without leaving their nodes behind", () => {
    const t = build();
    const dec = decodeSnapshot(fileOf(t), BS);
    if (!dec.ok) throw new Error(dec.message);
    const r = new RadixTreeIndex({ blockSize: BS });
    restoreSnapshot(r.snapshotAccess(), dec.snapshot, (w) => w === W[0]);
    t.removeWorker(W[1]!);
    t.removeWorker(W[2]!);
    t.removeWorker(W[3]!);
    while (t.reclaim()) {}
    expect(matches(r)).toEqual(matches(t));
    expect(r.stats().nodes).toBe(t.stats().nodes);
  });

  const refused = (bytes: Uint8Array, blockSize = BS) => {
    const d = decodeSnapshot(bytes, blockSize);
    return d.ok ? "accepted" : d.reason;
  };

  it("refuses a flipped byte anywhere, a truncated file, another version or block size", () => {
    const good = fileOf(build());
    expect(refused(good)).toBe("accepted");
    for (const at of [20, Math.floor(good.length / 2), good.length - 20, good.length - 1]) {
      const bad = good.slice();
      bad[at]! ^= 0x10;
      expect(refused(bad)).not.toBe("accepted");
    }
    const mid = good.slice();
    mid[Math.floor(good.length / 2)]! ^= 1;
    expect(refused(mid)).toBe("checksum");
    for (const n of [0, 10, 100, good.length - 13, good.length - 1]) {
      expect(refused(good.subarray(0, n))).toBe("truncated");
    }
    const v = good.slice();
    new DataView(v.buffer).setUint32(8, SNAPSHOT_VERSION + 1, true);
    expect(refused(v)).toBe("version");
    expect(refused(good, BS * 2)).toBe("block_size");
    expect(refused(new TextEncoder().encode("x".repeat(100)))).toBe("not_a_snapshot");
  });

  it("an empty index round-trips", () => {
    const dec = decodeSnapshot(fileOf(new RadixTreeIndex({ blockSize: BS })), BS);
    expect(dec.ok).toBe(true);
  });

  it("writes the same file with recycled chunk buffers, and copy buffers that grow in place", () => {
    const t = new RadixTreeIndex({ blockSize: BS });
    const access = t.snapshotAccess();
    let next = 1;
    /** `n` conversations of 8 blocks for worker `w` (enough for several sections). */
    const grow = (n: number) => {
      for (let c = 0; c < n; c++, next++) {
        const hashes = Array.from({ length: 8 }, (_, i) => engineHashFromSafeInt(next * 8 + i));
        const tokens = Array.from({ length: 8 * BS }, (_, i) => (i === 0 ? next : i));
        t.applyEvent(W[next % 3]!, stored(hashes, null, tokens));
      }
    };
    const files = () => {
      const cap = captureSnapshot(access, [], 1);
      const reused = [...encodeSnapshot(cap, { reuse: true })].map((c) => c.byteLength);
      // A recycled chunk is overwritten by later ones: copy each before asking for the next.
      const copies: Uint8Array[] = [];
      for (const c of encodeSnapshot(cap, { reuse: true })) copies.push(c.slice());
      const plain = Buffer.concat([...encodeSnapshot(cap)]);
      expect(copies.map((c) => c.byteLength)).toEqual(reused);
      expect(Buffer.compare(Buffer.concat(copies), plain)).toBe(0);
      return new Uint8Array(plain);
    };
    const restoredMatches = (file: Uint8Array) => {
      const dec = decodeSnapshot(file, BS);
      if (!dec.ok) throw new Error(dec.message);
      const r = new RadixTreeIndex({ blockSize: BS });
      restoreSnapshot(r.snapshotAccess(), dec.snapshot);
      return r.stats().workerBlocks;
    };
    grow(1_000);
    const before = access.prepare().map((b) => b.length);
    expect(restoredMatches(files())).toBe(t.stats().workerBlocks);
    grow(3_000); // past the copy buffers' room: they grow in place
    const after = access.prepare();
    expect(after.map((b) => b.length)[1]).toBeGreaterThan(before[1]!);
    expect(after.every((b) => (b.buffer as ArrayBuffer & { resizable: boolean }).resizable)).toBe(
      true,
    );
    expect(restoredMatches(files())).toBe(t.stats().workerBlocks);
    expect(t.stats().workerBlocks).toBe(32_000);
  });

  it("ends chunks early when the time slice is spent, with the same content", () => {
    const t = new RadixTreeIndex({ blockSize: BS });
    for (let c = 0; c < 500; c++) {
      const hashes = Array.from({ length: 8 }, (_, i) => engineHashFromSafeInt(c * 8 + i + 1));
      const tokens = Array.from({ length: 8 * BS }, (_, i) => (i === 0 ? c + 1 : i));
      t.applyEvent(W[c % 3]!, stored(hashes, null, tokens));
    }
    const cap = captureSnapshot(t.snapshotAccess(), [], 1);
    const whole = [...encodeSnapshot(cap)];
    const sliced = [...encodeSnapshot(cap, { sliceOver: () => true })];
    expect(sliced.length).toBeGreaterThan(whole.length * 10); // a chunk every 64 records
    const a = decodeSnapshot(new Uint8Array(Buffer.concat(whole)), BS);
    const b = decodeSnapshot(new Uint8Array(Buffer.concat(sliced)), BS);
    if (!a.ok || !b.ok) throw new Error("refused");
    expect(b.snapshot.nodes).toEqual(a.snapshot.nodes);
    expect(b.snapshot.entries).toEqual(a.snapshot.entries);
  });
});
