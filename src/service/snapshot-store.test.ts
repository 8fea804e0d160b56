import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { RadixTreeIndex } from "../index/radix-tree.js";
import { decodeSnapshot } from "../index/snapshot-codec.js";
import { ApplySlicer } from "../ingest/apply-slicer.js";
import { engineHashFromSafeInt, engineHashFromString } from "../protocol/engine-hash.js";
import { workerKey } from "../protocol/worker.js";
import { noopLogger } from "../util/log-sink.js";
import { SnapshotStore } from "./snapshot-store.js";

const BS = 4;
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** Worker w0 stores `n` chains of 8 blocks, from chain `from` on. */
function fill(t: RadixTreeIndex, from: number, n: number): void {
  for (let c = from; c < from + n; c++) {
    t.applyEvent(workerKey("w0"), {
      type: "stored",
      blockHashes: Array.from({ length: 8 }, (_, i) => engineHashFromSafeInt(c * 8 + i + 1)),
      parentHash: null,
      tokenIds: Array.from({ length: 8 * BS }, (_, i) => (i === 0 ? c + 1 : i)),
      blockSize: BS,
      loraId: null,
      loraName: null,
      medium: null,
      tier: "gpu",
    });
  }
}

function entries(bytes: Uint8Array): number {
  const d = decodeSnapshot(bytes, BS);
  if (!d.ok) throw new Error(d.message);
  return d.snapshot.entries.length / 5;
}

describe("SnapshotStore: writes and exports share the copy buffers", () => {
  it("an export is one instant; a write asked for meanwhile waits for it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kvr-store-"));
    dirs.push(dir);
    const path = join(dir, "index.snap");
    const t = new RadixTreeIndex({ blockSize: BS });
    const store = new SnapshotStore(
      { path, intervalMs: 60_000, blockSize: BS, logger: noopLogger },
      { access: t.snapshotAccess(), streams: () => [] },
    );
    fill(t, 0, 2_000); // 16,000 entries: several chunks
    const chunks: Uint8Array[] = [];
    const it = store.export()[Symbol.asyncIterator]();
    chunks.push((await it.next()).value as Uint8Array); // the export has taken its capture
    fill(t, 2_000, 1_000);
    const writing = store.write(); // must not capture into the buffers the export reads
    for (let r = await it.next(); !r.done; r = await it.next()) chunks.push(r.value);
    expect((await writing)?.bytes).toBeGreaterThan(0);
    expect(entries(new Uint8Array(Buffer.concat(chunks)))).toBe(16_000);
    expect(entries(new Uint8Array(readFileSync(path)))).toBe(24_000);
    expect(store.status()).toMatchObject({ writes: 1, exports: 1, failures: 0 });
  });

  it("string hashes are the capture's own, though ids are freed and reused while it is encoded", async () => {
    const t = new RadixTreeIndex({ blockSize: BS });
    const W = workerKey("w0");
    const ev = (type: "stored" | "removed", tag: string, c: number) =>
      t.applyEvent(W, {
        ...(type === "stored"
          ? {
              type,
              parentHash: null,
              tokenIds: Array.from({ length: 8 * BS }, (_, i) => (i === 0 ? c + 1 : i)),
              blockSize: BS,
              loraId: null,
              loraName: null,
            }
          : { type }),
        blockHashes: Array.from({ length: 8 }, (_, i) => engineHashFromString(`${tag}-${c}-${i}`)),
        medium: null,
        tier: "gpu",
      } as Parameters<RadixTreeIndex["applyEvent"]>[1]);
    for (let c = 0; c < 2_000; c++) ev("stored", "old", c);
    const store = new SnapshotStore(
      { path: null, intervalMs: 60_000, blockSize: BS, logger: noopLogger },
      { access: t.snapshotAccess(), streams: () => [] },
    );
    const it = store.export()[Symbol.asyncIterator]();
    const chunks = [(await it.next()).value as Uint8Array]; // the capture is taken
    // Half the chains evicted, new ones stored: their ids are the freed ones.
    for (let c = 1_000; c < 2_000; c++) ev("removed", "old", c);
    for (let c = 2_000; c < 3_000; c++) ev("stored", "new", c);
    for (let r = await it.next(); !r.done; r = await it.next()) chunks.push(r.value);
    const d = decodeSnapshot(new Uint8Array(Buffer.concat(chunks)), BS);
    if (!d.ok) throw new Error(d.message);
    expect(d.snapshot.strings).toHaveLength(16_000);
    expect(d.snapshot.strings.filter((x) => !x.startsWith("s:old-"))).toEqual([]);
  });

  it("counts a failed write and keeps serving exports without a path", async () => {
    const t = new RadixTreeIndex({ blockSize: BS });
    fill(t, 0, 10);
    const bad = new SnapshotStore(
      { path: "/nonexistent-dir/x.snap", intervalMs: 60_000, blockSize: BS, logger: noopLogger },
      { access: t.snapshotAccess(), streams: () => [] },
    );
    expect(await bad.write()).toBeNull();
    expect(bad.status()).toMatchObject({ writes: 0, failures: 1, lastOkMs: null });
    const off = new SnapshotStore(
      { path: null, intervalMs: 60_000, blockSize: BS, logger: noopLogger },
      { access: t.snapshotAccess(), streams: () => [] },
    );
    expect(off.load()).toBeNull();
    expect(off.loadResult).toEqual({ result: "cold", source: "none", reason: "off" });
    expect(await off.write()).toBeNull();
    const parts: Uint8Array[] = [];
    for await (const c of off.export()) parts.push(c);
    expect(entries(new Uint8Array(Buffer.concat(parts)))).toBe(80);
  });

  it("a write whose capture throws is counted and does not block the next", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kvr-store-"));
    dirs.push(dir);
    const t = new RadixTreeIndex({ blockSize: BS });
    fill(t, 0, 10);
    const access = t.snapshotAccess();
    let fail = true;
    const flaky = {
      ...access,
      prepare: () => {
        if (fail) throw new Error("no memory");
        return access.prepare();
      },
    };
    const store = new SnapshotStore(
      { path: join(dir, "x.snap"), intervalMs: 60_000, blockSize: BS, logger: noopLogger },
      { access: flaky, streams: () => [] },
    );
    expect(await store.write()).toBeNull();
    fail = false;
    expect((await store.write())?.bytes).toBeGreaterThan(0);
    expect(store.status()).toMatchObject({ writes: 1, failures: 1 });
  });
});

describe("SnapshotStore: the index copied in steps through the event appliers' queue", () => {
  /** A write while `apply` adds one chain per event-loop turn; what it saw. */
  async function writeWhileApplying(viaQueue: boolean) {
    const dir = mkdtempSync(join(tmpdir(), "kvr-store-"));
    dirs.push(dir);
    const path = join(dir, "index.snap");
    const t = new RadixTreeIndex({ blockSize: BS });
    fill(t, 0, 20_000); // 160,000 entries: a few MB of tables, several 1 MB steps
    const slicer = new ApplySlicer(0); // one step per turn
    let steps = 0;
    const runner = {
      runSteps: (step: () => boolean) =>
        slicer.runSteps(() => {
          steps++;
          return step();
        }),
    };
    const store = new SnapshotStore(
      { path, intervalMs: 60_000, blockSize: BS, logger: noopLogger, steps: runner },
      { access: t.snapshotAccess(), streams: () => [] },
    );
    let next = 20_000;
    let on = true;
    const tick = () => {
      if (!on) return;
      // Two per turn through the queue (one runs per turn): the queue is never empty, so
      // the capture starts behind tasks that still change the index.
      if (viaQueue) for (let k = 0; k < 2; k++) slicer.run(() => fill(t, next++, 1));
      else fill(t, next++, 1);
      setImmediate(tick);
    };
    setImmediate(tick);
    const w = await store.write();
    on = false;
    expect(w?.bytes).toBeGreaterThan(0);
    const saved = entries(new Uint8Array(readFileSync(path)));
    return { store, steps, saved, applied: 8 * next };
  }

  it("events wait behind the copy, so it is taken in several steps and whole", async () => {
    const r = await writeWhileApplying(true);
    expect(r.steps).toBeGreaterThan(3);
    expect(r.store.status().spoiledCaptures).toBe(0);
    // Some chains were applied while the file was prefaulted and encoded, none half.
    expect(r.saved % 8).toBe(0);
    expect(r.saved).toBeGreaterThanOrEqual(160_000);
    expect(r.saved).toBeLessThan(r.applied);
  });

  it("a change outside the queue spoils the copy: taken again, then at once", async () => {
    const r = await writeWhileApplying(false);
    expect(r.store.status().spoiledCaptures).toBe(2);
    expect(r.saved % 8).toBe(0);
    expect(r.saved).toBeGreaterThan(160_000);
  });
});
