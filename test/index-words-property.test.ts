/**
 * Property test of the threaded ingest path against the object path: random event
 * streams with integer hashes, encoded as vLLM batches, decoded once into `KvEvent`s
 * (applied with `applyEvent`) and once into event tapes (several batches per tape group,
 * applied with `applyTapeEvent`, i.e. `applyStoredWords` / `applyRemovedWords`). Both
 * indexes must give the same outcome for every event and agree on `findMatches` and
 * `stats`; the tapes must stand for exactly the decoded events.
 */

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { computeBlockKeys } from "../src/index/block-key.js";
import { RadixTreeIndex } from "../src/index/radix-tree.js";
import { applyTapeEvent } from "../src/ingest/tape-apply.js";
import { encodeEventBatch, type WireEvent } from "../src/protocol/event-encoder.js";
import { TapeWriter, tapeEvent } from "../src/protocol/event-tape.js";
import { decodeEventBatch, decodeEventTape } from "../src/protocol/vllm-codec.js";
import { workerKey } from "../src/protocol/worker.js";

const BS = 2;
const W = workerKey("w", 0);
const HASHES = [1n, 2n, 3n, (1n << 64n) - 2n, 1n << 63n, 0xdab89baa7b5857c0n, 1n << 32n, 0n];
const MEDIUMS = [null, "GPU", "CPU", "DISK"] as const;
const hash = fc.constantFrom(...HASHES);
const medium = fc.constantFrom(...MEDIUMS);

const stored = fc
  .record({
    n: fc.integer({ min: 1, max: 3 }),
    parent: fc.option(hash, { freq: 2 }),
    lora: fc.constantFrom(null, "", "sql"),
    loraId: fc.constantFrom(null, null, 0, 7),
    medium,
    hashes: fc.array(hash, { minLength: 3, maxLength: 3 }),
    tokens: fc.array(fc.nat(1), { minLength: 3 * BS, maxLength: 3 * BS }),
    damage: fc.constantFrom("none", "none", "none", "none", "blockSize", "tokenCount", "offload"),
  })
  .map(({ n, parent, lora, loraId, medium, hashes, tokens, damage }): WireEvent => {
    const offload = damage === "offload";
    return {
      type: "BlockStored",
      blockHashes: hashes.slice(0, n),
      parentHash: offload ? null : parent,
      tokenIds: offload ? [] : tokens.slice(0, damage === "tokenCount" ? n * BS - 1 : n * BS),
      blockSize: offload ? 0 : damage === "blockSize" ? BS + 1 : BS,
      loraId,
      loraName: lora,
      medium,
    };
  });
const removed = fc
  .record({ hashes: fc.array(hash, { minLength: 1, maxLength: 3 }), medium })
  .map(({ hashes, medium }): WireEvent => ({ type: "BlockRemoved", blockHashes: hashes, medium }));
const event: fc.Arbitrary<WireEvent> = fc.oneof(
  { arbitrary: stored, weight: 6 },
  { arbitrary: removed, weight: 3 },
  { arbitrary: fc.constant<WireEvent>({ type: "AllBlocksCleared" }), weight: 1 },
);
/** Batches of events; a stored event may be sent twice (vLLM's duplicate copies). */
const batches = fc.array(
  fc.array(
    fc.oneof(
      event,
      event.map((e) => (e.type === "BlockStored" ? [e, e] : [e])),
    ),
    {
      minLength: 1,
      maxLength: 4,
    },
  ),
  { minLength: 1, maxLength: 12 },
);

describe("event tapes through the words entry points", () => {
  it("give the object path's outcomes, matches and stats", () => {
    fc.assert(
      fc.property(batches, fc.integer({ min: 1, max: 4 }), (raw, groupSize) => {
        const payloads = raw.map((events) =>
          encodeEventBatch({ ts: 1, events: events.flat(), dpRank: null }),
        );
        const byObjects = new RadixTreeIndex({ blockSize: BS, initialCapacity: 4 });
        const byWords = new RadixTreeIndex({ blockSize: BS, initialCapacity: 4 });
        const writer = new TapeWriter();
        const prompts: { tokens: number[]; lora: string | null }[] = [];
        for (let g = 0; g < payloads.length; g += groupSize) {
          writer.reset();
          const group = payloads.slice(g, g + groupSize);
          const tapes = group.map((p) => {
            const r = decodeEventTape(p, writer);
            if (r === null || !r.ok) throw new Error("expected a tape");
            return r.tape;
          });
          writer.finish();
          group.forEach((payload, b) => {
            const objects = decodeEventBatch(payload);
            if (!objects.ok) throw new Error(objects.error.message);
            const tape = tapes[b]!;
            expect(tape.events).toBe(objects.batch.events.length);
            objects.batch.events.forEach((e, i) => {
              expect(tapeEvent(tape, i)).toEqual(e);
              const want = byObjects.applyEvent(W, e);
              expect(applyTapeEvent(byWords, W, tape, i)).toEqual(want);
              if (e.type === "stored" && e.tokenIds.length > 0) {
                prompts.push({ tokens: Array.from(e.tokenIds), lora: e.loraName });
              }
            });
          });
        }
        for (const { tokens, lora } of prompts) {
          const keys = computeBlockKeys(tokens, BS, lora);
          expect(byWords.findMatches(keys)).toEqual(byObjects.findMatches(keys));
        }
        expect(byWords.stats()).toEqual(byObjects.stats());
      }),
      { numRuns: 300 },
    );
  });

  it("leave batches that are not all integer hashes to the object path", () => {
    const writer = new TapeWriter();
    writer.reset();
    const binary = encodeEventBatch(
      { ts: 1, events: [{ type: "BlockRemoved", blockHashes: [7n], medium: null }], dpRank: 0 },
      { hashForm: "binary" },
    );
    expect(decodeEventTape(binary, writer)).toBeNull();
    expect(writer.events).toBe(0);
    const bad = decodeEventTape(new Uint8Array([0x92, 0xc1]), writer);
    expect(bad).toEqual(decodeEventBatch(new Uint8Array([0x92, 0xc1])));
    expect(bad?.ok).toBe(false);
  });
});
