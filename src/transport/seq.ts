/**
 * The 8-byte big-endian unsigned sequence frame of the ZeroMQ transport (wire-formats §1).
 * Sequence numbers are 64-bit unsigned, so they are handled as bigint.
 */

/** The replay end marker's sequence frame: -1 as a signed 64-bit int (FF×8). */
export const END_SEQ_FRAME: Uint8Array = new Uint8Array(8).fill(0xff);

/** Encode a sequence number as its 8-byte big-endian frame. */
export function encodeSeq(seq: bigint): Buffer {
  const buf = Buffer.allocUnsafe(8);
  buf.writeBigUInt64BE(BigInt.asUintN(64, seq));
  return buf;
}

/** Decode an 8-byte frame; null when the frame is not exactly 8 bytes. */
export function decodeSeq(frame: Uint8Array): bigint | null {
  if (frame.length !== 8) return null;
  const view = new DataView(frame.buffer, frame.byteOffset, 8);
  return view.getBigUint64(0, false);
}

/** True for the FF×8 end-of-replay frame. */
export function isEndSeq(frame: Uint8Array): boolean {
  if (frame.length !== 8) return false;
  for (let i = 0; i < 8; i++) if (frame[i] !== 0xff) return false;
  return true;
}
