/**
 * Picks the payload decoder for a stream's wire format, behind one interface so the
 * subscriber does not care which codec produced the `KvEvent`s. Mooncake's decoder is
 * stateful (its adapter remembers keys and replicas), hence one decoder per stream and
 * a `reset()` the subscriber calls whenever the stream's state is declared lost.
 */

import type { DecodeError, SkipCounts } from "../protocol/decode-error.js";
import type { EventBatch } from "../protocol/events.js";
import { MooncakeStoreAdapter } from "../protocol/mooncake-adapter.js";
import { decodeMooncakeBatch } from "../protocol/mooncake-codec.js";
import { decodeEventBatch } from "../protocol/vllm-codec.js";
import type { StreamFormat } from "./stream-state.js";

/** Same shape as the codecs' `DecodeResult`: never throws, one error per bad batch. */
export type BatchDecodeResult =
  | { readonly ok: true; readonly batch: EventBatch; readonly skipped: SkipCounts }
  | { readonly ok: false; readonly error: DecodeError };

/** Turns one stream's payload frames, in order, into batches of `KvEvent`s. */
export interface StreamDecoder {
  decode(payload: Uint8Array): BatchDecodeResult;
  /** Forget per-stream state (the index has just dropped the worker). */
  reset(): void;
}

/** A fresh decoder for one stream of the given format. */
export function createStreamDecoder(format: StreamFormat): StreamDecoder {
  switch (format) {
    case "vllm":
    case "sglang": {
      const options = { fieldOrder: format } as const;
      return { decode: (payload) => decodeEventBatch(payload, options), reset: () => {} };
    }
    case "mooncake": {
      const adapter = new MooncakeStoreAdapter();
      return {
        decode(payload) {
          const result = decodeMooncakeBatch(payload);
          if (!result.ok) return result;
          const events = adapter.applyBatch(result.batch);
          return {
            ok: true,
            batch: { ts: result.batch.ts, events, dpRank: null },
            skipped: result.skipped,
          };
        },
        reset: () => adapter.reset(),
      };
    }
  }
}
