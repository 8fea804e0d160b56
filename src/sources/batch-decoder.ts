/**
 * Picks the payload decoder for a stream's wire format, behind one signature so the
 * subscriber does not care which codec produced the `KvEvent`s.
 */

import type { DecodeError, SkipCounts } from "../protocol/decode-error.js";
import type { EventBatch } from "../protocol/events.js";
import { decodeEventBatch } from "../protocol/vllm-codec.js";
import type { StreamFormat } from "./stream-state.js";

/** Same shape as the codecs' `DecodeResult`: never throws, one error per bad batch. */
export type BatchDecodeResult =
  | { readonly ok: true; readonly batch: EventBatch; readonly skipped: SkipCounts }
  | { readonly ok: false; readonly error: DecodeError };

/** Turns one payload frame into a batch of `KvEvent`s. */
export type BatchDecoder = (payload: Uint8Array) => BatchDecodeResult;

/** The decoder for a stream format. */
export function decoderFor(format: StreamFormat): BatchDecoder {
  switch (format) {
    case "vllm":
      return (payload) => decodeEventBatch(payload);
    case "mooncake":
      throw new Error("mooncake format: codec not available yet");
  }
}
