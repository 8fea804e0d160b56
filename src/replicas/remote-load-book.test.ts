import { describe, expect, it } from "vitest";
import type { WorkerKey } from "../protocol/worker.js";
import { bySize } from "./redis-load-sync.js";
import { RemoteLoadBook } from "./remote-load-book.js";
import {
  decodeEntry,
  decodeMessage,
  encodeEntry,
  encodeMessage,
  MAX_SHARED_PREFIX_BLOCKS,
  type SharedEntry,
} from "./wire.js";

const W = "w0#0" as WorkerKey;
const entry = (id: string, addedMs: number, over: Partial<SharedEntry> = {}): SharedEntry => ({
  id,
  worker: W,
  prefillTokens: 100,
  blocks: 10,
  addedMs,
  prefillEndMs: addedMs + 1000,
  expiresMs: addedMs + 5000,
  pending: true,
  ...over,
});

describe("RemoteLoadBook", () => {
  it("sums peers' requests per worker and follows first-token and done", () => {
    const b = new RemoteLoadBook({ staleAfterMs: 3000 });
    b.add("a", entry("r1", 0), 0);
    b.add("b", entry("r2", 10), 10);
    expect(b.totals(W)).toMatchObject({ pendingPrefillTokens: 200, activeRequests: 2 });
    expect(b.totalsSince(W, 5)).toMatchObject({ pendingPrefillTokens: 100, activeBlocks: 10 });
    b.firstToken("a", "r1");
    expect(b.totals(W)).toMatchObject({ pendingPrefillTokens: 100, activeBlocks: 20 });
    b.done("b", "r2", 20);
    expect(b.totals(W)).toMatchObject({ pendingPrefillTokens: 0, activeBlocks: 10 });
    expect(b.totalsSince(W, 5)).toMatchObject({ activeRequests: 0 });
  });

  it("drops a silent replica whole, and applies each entry's deadlines", () => {
    const b = new RemoteLoadBook({ staleAfterMs: 3000 });
    b.heard("a", 0, 0);
    b.add("a", entry("r1", 0), 0);
    b.heard("b", 0, 0);
    b.add("b", entry("r2", 0, { prefillEndMs: 500, expiresMs: 2000 }), 0);
    b.heard("b", 1, 2500);
    b.sweep(600); // r2's prefill deadline passed
    expect(b.totals(W)).toMatchObject({ pendingPrefillTokens: 100, activeRequests: 2 });
    b.sweep(2500); // r2 expired; a still within staleAfterMs
    expect(b.totals(W)).toMatchObject({ activeRequests: 1 });
    b.sweep(3000); // a silent for 3000 ms
    expect(b.totals(W).activeRequests).toBe(0);
    expect(b.stats()).toMatchObject({ droppedReplicas: 1, expiredEntries: 1, entries: 0 });
  });

  it("a hash read that raced a done does not revive the request", () => {
    const b = new RemoteLoadBook({ staleAfterMs: 3000 });
    b.add("a", entry("r1", 0), 0);
    b.done("a", "r1", 5);
    b.replace("a", [entry("r1", 0), entry("r2", 1)], 6);
    expect(b.totals(W).activeRequests).toBe(1);
  });

  it("a request routed again under its id after its done survives a hash read", () => {
    const b = new RemoteLoadBook({ staleAfterMs: 3000 });
    b.add("a", entry("r1", 0), 0);
    b.done("a", "r1", 5);
    b.add("a", entry("r1", 6), 6); // a retry on another attempt keeps the request id
    b.replace("a", [entry("r1", 6)], 7);
    expect(b.totals(W).activeRequests).toBe(1);
  });

  it("tells which queued prefill shares a prompt's prefix, until the prefill ends", () => {
    const b = new RemoteLoadBook({ staleAfterMs: 3000 });
    // Chained keys, two words per block: r1 and r2 share block 0, r1 and r3 blocks 0–1.
    const k1 = Uint32Array.of(1, 1, 2, 2, 3, 3);
    b.add("a", entry("r1", 0, { prefixKeys: k1 }), 0);
    b.add("b", entry("r2", 0, { prefixKeys: Uint32Array.of(1, 1, 9, 9) }), 0);
    b.add("b", entry("r3", 0, { prefixKeys: Uint32Array.of(1, 1, 2, 2) }), 0);
    b.add("b", entry("r4", 0), 0); // no keys: shares only the empty prefix
    expect(b.pendingSharing(W, k1, 1)).toBe(300);
    expect(b.pendingSharing(W, k1, 2)).toBe(200);
    expect(b.pendingSharing(W, k1, 3)).toBe(100);
    expect(b.pendingSharing(W, k1, 4)).toBe(0); // beyond the prompt
    expect(b.pendingSharing(W, k1, 0)).toBe(400);
    b.firstToken("a", "r1");
    expect(b.pendingSharing(W, k1, 2)).toBe(100);
    b.sweep(1000); // every prefill deadline passed
    expect(b.pendingSharing(W, k1, 1)).toBe(0);
  });

  it("flags a sequence gap", () => {
    const b = new RemoteLoadBook({ staleAfterMs: 3000 });
    expect(b.heard("a", 7, 0)).toBe("new");
    expect(b.heard("a", 8, 0)).toBe("next");
    expect(b.heard("a", 10, 0)).toBe("gap");
  });
});

describe("replica wire format", () => {
  it("round-trips messages and entries", () => {
    const e = entry("r1", 123);
    expect(decodeEntry(encodeEntry(e))).toEqual(e);
    const m = {
      replica: "a",
      instance: "i-1",
      seq: 3,
      sentMs: 9,
      ops: [
        { op: "add", entry: e },
        { op: "first", id: "r1" },
        { op: "done", id: "r1" },
        { op: "reload" },
        { op: "leave" },
      ] as const,
    };
    expect(decodeMessage(encodeMessage(m))).toEqual(m);
    // Prefix keys travel as little-endian base64, whole blocks only.
    const keys = Uint32Array.of(0xdeadbeef, 1, 0, 0xffffffff, 7);
    const k = decodeEntry(encodeEntry(entry("r2", 5, { prefixKeys: keys })));
    expect(k?.prefixKeys).toEqual(keys.subarray(0, 4));
    // Only a pending request's keys are sent; a long prompt's are cut to the bound.
    expect(decodeEntry(encodeEntry(entry("r3", 5, { prefixKeys: keys, pending: false })))).toEqual(
      entry("r3", 5, { pending: false }),
    );
    const long = new Uint32Array(2 * MAX_SHARED_PREFIX_BLOCKS + 6).fill(3);
    const cut = decodeEntry(encodeEntry(entry("r4", 5, { prefixKeys: long })))?.prefixKeys;
    expect(cut?.length).toBe(2 * MAX_SHARED_PREFIX_BLOCKS);
  });

  it("rejects malformed input instead of throwing", () => {
    for (const bad of [
      "",
      "{",
      "[]",
      '["a","i",1,2,[["z"]]]',
      '["a","i",1.5,2,[]]',
      '["a","i",1,2,[["f",3]]]',
      '["a",1,2,[]]',
    ]) {
      expect(decodeMessage(bad)).toBeNull();
    }
    expect(decodeEntry('["r","w",-1,0,0,0,0,1]')).toBeNull();
    // Prefix keys: not base64, not whole blocks, empty, or not a string.
    for (const keys of ['"@@"', '"AAAA"', '""', "5"]) {
      expect(decodeEntry(`["r","w",1,0,0,0,0,1,${keys}]`)).toBeNull();
    }
    expect(decodeEntry('["r","w",1,0,0,0,0,1,"AAAAAAAAAAA="]')).not.toBeNull();
  });
});

describe("RemoteLoadBook totalsSince against a rescan", () => {
  /** Small deterministic PRNG (mulberry32). */
  const rng = (seed: number) => () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };

  it("matches a full recount after every operation, in any order of times", () => {
    for (let run = 0; run < 40; run++) {
      const r = rng(run + 1);
      const b = new RemoteLoadBook({ staleAfterMs: 1e9 });
      // Reference: every live entry with its current pending state.
      const live = new Map<string, { replica: string; e: SharedEntry; pending: boolean }>();
      const replicas = ["a", "b", "c"];
      let now = 0;
      let id = 0;
      for (let step = 0; step < 400; step++) {
        now += Math.floor(r() * 5);
        const op = r();
        const replica = replicas[Math.floor(r() * replicas.length)]!;
        if (op < 0.5) {
          // Peers' entries arrive late by up to 50 ms: times out of order.
          const e = entry(`r${id++}`, now - Math.floor(r() * 50), {
            prefillTokens: 1 + Math.floor(r() * 100),
            blocks: 1 + Math.floor(r() * 9),
            expiresMs: 1e12,
            prefillEndMs: 1e12,
          });
          b.add(replica, e, now);
          live.set(`${replica}/${e.id}`, { replica, e, pending: true });
        } else if (op < 0.65 && live.size > 0) {
          const [k, v] = [...live][Math.floor(r() * live.size)]!;
          b.firstToken(v.replica, v.e.id);
          live.set(k, { ...v, pending: false });
        } else if (op < 0.8 && live.size > 0) {
          const [k, v] = [...live][Math.floor(r() * live.size)]!;
          b.done(v.replica, v.e.id, now);
          live.delete(k);
        } else if (op < 0.85) {
          // A full read of one replica's hash: keep a random half of its entries.
          const mine = [...live].filter(([, v]) => v.replica === replica);
          const kept = mine.filter(() => r() < 0.5);
          for (const [k] of mine) live.delete(k);
          for (const [k, v] of kept) live.set(k, { ...v, pending: true });
          b.replace(
            replica,
            kept.map(([, v]) => v.e),
            now,
          );
        }
        // Snapshot times move mostly forward, sometimes back.
        const since = now - Math.floor(r() * 80);
        const want = {
          pendingPrefillTokens: 0,
          pendingRequests: 0,
          activeBlocks: 0,
          activeRequests: 0,
        };
        for (const v of live.values()) {
          if (v.e.addedMs < since) continue;
          if (v.pending) {
            want.pendingPrefillTokens += v.e.prefillTokens;
            want.pendingRequests++;
          }
          want.activeBlocks += v.e.blocks;
          want.activeRequests++;
        }
        expect({ ...b.totalsSince(W, since) }, `run ${run} step ${step}`).toEqual(want);
      }
    }
  });
});

describe("replica messages stay small", () => {
  it("a long batch of adds with prompt keys goes out in parts of about 1 MB", () => {
    const keys = new Uint32Array(2 * 2048); // a 32k-token prompt at block size 16
    const ops = Array.from({ length: 200 }, (_, i) => ({
      op: "add" as const,
      entry: entry(`r${i}`, i, { prefixKeys: keys }),
    }));
    const parts = bySize([...ops, { op: "done" as const, id: "r0" }], 1 << 20);
    expect(parts.length).toBeGreaterThan(1);
    expect(parts.flat()).toHaveLength(201); // all of them, in order
    expect(parts.flat().at(-1)).toEqual({ op: "done", id: "r0" });
    for (const p of parts) {
      const text = encodeMessage({ replica: "a", instance: "i", seq: 1, sentMs: 0, ops: p });
      expect(text.length).toBeLessThan(1.1 * 2 ** 20);
    }
    expect(bySize([], 1 << 20)).toEqual([[]]); // a heartbeat is one empty message
  });
});
