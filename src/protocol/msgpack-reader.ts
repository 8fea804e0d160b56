/**
 * A small pull reader over msgpack bytes, for the hot ingest path.
 *
 * A generic decoder builds a JS object tree and, with 64-bit support on, one BigInt per
 * block hash; the codecs then walk that tree a second time. This reader lets a codec walk
 * the bytes once: it reads 64-bit ints as two 32-bit halves straight into an engine hash
 * and token lists straight into a Uint32Array. Malformed input throws `MsgpackFormatError`
 * (the codecs turn it into a typed decode error); type mismatches are reported by the
 * `is*`/`try*` probes so the caller can name the field.
 *
 * Long file: one cursor over a buffer with a reader per msgpack type family; the
 * readers share the cursor's private state on the hot path.
 */

import {
  type EngineBlockHash,
  engineHashFromBytes,
  engineHashFromString,
  engineHashFromU32Pair as hashFromU32Pair,
} from "./engine-hash.js";
import type { StrTable } from "./str-table.js";

/** `tryStrId`: the next value is a string, but not one of the table's. */
export const STR_UNKNOWN = -2;
/** `tryStrId`: the next value is not a string (nothing consumed). */
export const NOT_STR = -1;

/** The bytes are not well-formed msgpack (truncated, reserved byte, too deep). */
export class MsgpackFormatError extends Error {}

/** Deepest nesting `skip` follows; deeper input is rejected rather than risking the stack. */
export const MAX_SKIP_DEPTH = 64;

const UTF8 = new TextDecoder("utf-8", { fatal: true });

/** Largest binary digest accepted as a block hash (vLLM sends 16 or 32 bytes). */
const MAX_DIGEST_BYTES = 64;

export class MsgpackReader {
  readonly bytes: Uint8Array;
  readonly view: DataView;
  pos = 0;

  constructor(bytes: Uint8Array) {
    this.bytes = bytes;
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  get atEnd(): boolean {
    return this.pos >= this.bytes.length;
  }

  /** The next type byte, not consumed. */
  peek(): number {
    if (this.pos >= this.bytes.length) throw new MsgpackFormatError("truncated: value expected");
    const b = this.bytes[this.pos]!;
    // 0xc1 is the one byte msgpack never uses: not a value of the wrong type, not msgpack.
    if (b === 0xc1) throw new MsgpackFormatError(`reserved type byte 0xc1 at offset ${this.pos}`);
    return b;
  }

  #need(n: number): void {
    if (this.pos + n > this.bytes.length) {
      throw new MsgpackFormatError(`truncated: ${n} more bytes expected at offset ${this.pos}`);
    }
  }

  /** Element count if the next value is an array (consumed), else -1 (nothing consumed). */
  tryArrayHeader(): number {
    const n = this.#containerHeader(0x90, 0xdc);
    // Every element takes at least one byte: a larger count is a lie, not a big array.
    if (n > this.bytes.length - this.pos) throw new MsgpackFormatError(`array of ${n} truncated`);
    return n;
  }

  /** Entry count if the next value is a map (consumed), else -1 (nothing consumed). */
  tryMapHeader(): number {
    const n = this.#containerHeader(0x80, 0xde);
    if (n * 2 > this.bytes.length - this.pos) throw new MsgpackFormatError(`map of ${n} truncated`);
    return n;
  }

  /**
   * Count of an array or map header (consumed), or -1: `fix` is the fix-form base (16
   * counts), `code16` the 16-bit form, `code16 + 1` the 32-bit form.
   */
  #containerHeader(fix: number, code16: number): number {
    const b = this.peek();
    if (b >= fix && b <= fix + 0x0f) {
      this.pos += 1;
      return b & 0x0f;
    }
    if (b === code16) {
      this.#need(3);
      const n = this.view.getUint16(this.pos + 1);
      this.pos += 3;
      return n;
    }
    if (b === code16 + 1) {
      this.#need(5);
      const n = this.view.getUint32(this.pos + 1);
      this.pos += 5;
      return n;
    }
    return -1;
  }

  /** Consume a nil and return true, or return false without consuming. */
  tryNil(): boolean {
    if (this.peek() !== 0xc0) return false;
    this.pos += 1;
    return true;
  }

  isStr(): boolean {
    const b = this.peek();
    return (b >= 0xa0 && b <= 0xbf) || b === 0xd9 || b === 0xda || b === 0xdb;
  }

  isInt(): boolean {
    const b = this.peek();
    return b <= 0x7f || b >= 0xe0 || (b >= 0xcc && b <= 0xcf) || (b >= 0xd0 && b <= 0xd3);
  }

  /**
   * If the next value is a string: consume it and return its id in `table`, or
   * `STR_UNKNOWN`. Otherwise `NOT_STR`, nothing consumed. Builds no JS string.
   */
  tryStrId(table: StrTable): number {
    const at = this.pos;
    const b = this.peek();
    let len: number;
    if (b >= 0xa0 && b <= 0xbf) {
      len = b & 0x1f;
      this.pos = at + 1;
    } else if (b === 0xd9) {
      this.#need(2);
      len = this.bytes[at + 1]!;
      this.pos = at + 2;
    } else if (this.isStr()) {
      // Long strings are never table entries, but must still be valid UTF-8.
      this.tryStr();
      return STR_UNKNOWN;
    } else return NOT_STR;
    const start = this.pos;
    if (start + len > this.bytes.length) throw new MsgpackFormatError(`string of ${len} truncated`);
    const id = table.match(this.bytes, start, len);
    if (id >= 0) {
      this.pos = start + len;
      return id;
    }
    this.pos = at;
    this.tryStr();
    return STR_UNKNOWN;
  }

  /** A string (consumed), or null if the next value is not a string (nothing consumed). */
  tryStr(): string | null {
    const b = this.peek();
    let len: number;
    let start: number;
    if (b >= 0xa0 && b <= 0xbf) {
      len = b & 0x1f;
      start = this.pos + 1;
    } else if (b === 0xd9) {
      this.#need(2);
      len = this.bytes[this.pos + 1]!;
      start = this.pos + 2;
    } else if (b === 0xda) {
      this.#need(3);
      len = this.view.getUint16(this.pos + 1);
      start = this.pos + 3;
    } else if (b === 0xdb) {
      this.#need(5);
      len = this.view.getUint32(this.pos + 1);
      start = this.pos + 5;
    } else return null;
    const end = start + len;
    if (end > this.bytes.length) throw new MsgpackFormatError(`string of ${len} truncated`);
    this.pos = end;
    return decodeUtf8(this.bytes, start, end);
  }

  /**
   * An integer as a JS number (consumed), or null if the next value is not an integer.
   * 64-bit values outside the safe range throw a RangeError (the caller names the field).
   */
  tryInt(): number | null {
    const b = this.peek();
    if (b <= 0x7f) {
      this.pos += 1;
      return b;
    }
    if (b >= 0xe0) {
      this.pos += 1;
      return b - 0x100;
    }
    const v = this.view;
    const p = this.pos;
    switch (b) {
      case 0xcc:
        this.#need(2);
        this.pos += 2;
        return this.bytes[p + 1]!;
      case 0xcd:
        this.#need(3);
        this.pos += 3;
        return v.getUint16(p + 1);
      case 0xce:
        this.#need(5);
        this.pos += 5;
        return v.getUint32(p + 1);
      case 0xcf: {
        this.#need(9);
        const n = v.getUint32(p + 1) * 0x1_0000_0000 + v.getUint32(p + 5);
        if (n > Number.MAX_SAFE_INTEGER) throw new RangeError("integer beyond 2^53");
        this.pos += 9;
        return n;
      }
      case 0xd0:
        this.#need(2);
        this.pos += 2;
        return v.getInt8(p + 1);
      case 0xd1:
        this.#need(3);
        this.pos += 3;
        return v.getInt16(p + 1);
      case 0xd2:
        this.#need(5);
        this.pos += 5;
        return v.getInt32(p + 1);
      case 0xd3: {
        this.#need(9);
        const n = v.getInt32(p + 1) * 0x1_0000_0000 + v.getUint32(p + 5);
        if (!Number.isSafeInteger(n)) throw new RangeError("integer beyond 2^53");
        this.pos += 9;
        return n;
      }
      default:
        return null;
    }
  }

  /** An int or float as a number (consumed), or null if neither (nothing consumed). */
  tryNumber(): number | null {
    const b = this.peek();
    if (b === 0xcb) {
      this.#need(9);
      const x = this.view.getFloat64(this.pos + 1);
      this.pos += 9;
      return x;
    }
    if (b === 0xca) {
      this.#need(5);
      const x = this.view.getFloat32(this.pos + 1);
      this.pos += 5;
      return x;
    }
    if (b === 0xcf || b === 0xd3) {
      // A timestamp in a 64-bit int (Mooncake's milliseconds) fits a double closely enough.
      this.#need(9);
      const hi = b === 0xcf ? this.view.getUint32(this.pos + 1) : this.view.getInt32(this.pos + 1);
      const x = hi * 0x1_0000_0000 + this.view.getUint32(this.pos + 5);
      this.pos += 9;
      return x;
    }
    return this.tryInt();
  }

  /** Output of a successful `tryIntHash`: the hash's 64 bits. */
  hashHi = 0;
  hashLo = 0;

  /**
   * A block hash sent as an integer (consumed), as (`hashHi`, `hashLo`): the same 64 bits
   * `tryHash` formats. False, nothing consumed, for anything else (digests, strings).
   */
  tryIntHash(): boolean {
    const p = this.pos;
    const b = this.peek();
    if (b <= 0x7f || b >= 0xe0) {
      this.pos = p + 1;
      this.hashHi = b <= 0x7f ? 0 : 0xffff_ffff;
      this.hashLo = b <= 0x7f ? b : (b - 0x100) >>> 0;
      return true;
    }
    switch (b) {
      case 0xcf:
      case 0xd3:
        this.#need(9);
        this.hashHi = this.view.getUint32(p + 1);
        this.hashLo = this.view.getUint32(p + 5);
        this.pos = p + 9;
        return true;
      case 0xcc:
      case 0xcd:
      case 0xce:
      case 0xd0:
      case 0xd1:
      case 0xd2: {
        const n = this.tryInt()!;
        this.hashHi = n < 0 ? 0xffff_ffff : 0;
        this.hashLo = n >>> 0;
        return true;
      }
      default:
        return false;
    }
  }

  /**
   * A block hash in any wire form (consumed): an int of any width and sign, a binary
   * digest of 1–64 bytes, or a non-empty string. Null if the value is none of these
   * (nothing consumed).
   */
  tryHash(): EngineBlockHash | null {
    // The integer cases repeat `tryIntHash` on purpose: calling it and reading its
    // output fields back measured ~10 % slower decoding (bench/decode-bench.ts).
    const bytes = this.bytes;
    const p = this.pos;
    const b = this.peek();
    if (b <= 0x7f) {
      this.pos = p + 1;
      return hashFromU32Pair(0, b);
    }
    const v = this.view;
    switch (b) {
      case 0xcf:
        this.#need(9);
        this.pos = p + 9;
        return hashFromU32Pair(v.getUint32(p + 1), v.getUint32(p + 5));
      case 0xd3:
        // Signed: the same 64 bits are the same hash (two's complement).
        this.#need(9);
        this.pos = p + 9;
        return hashFromU32Pair(v.getUint32(p + 1), v.getUint32(p + 5));
      case 0xcc:
      case 0xcd:
      case 0xce:
      case 0xd0:
      case 0xd1:
      case 0xd2: {
        const n = this.tryInt()!;
        return hashFromU32Pair(n < 0 ? 0xffff_ffff : 0, n >>> 0);
      }
      case 0xc4:
      case 0xc5:
      case 0xc6: {
        const hdr = b === 0xc4 ? 2 : b === 0xc5 ? 3 : 5;
        this.#need(hdr);
        const len =
          b === 0xc4 ? bytes[p + 1]! : b === 0xc5 ? v.getUint16(p + 1) : v.getUint32(p + 1);
        if (len === 0 || len > MAX_DIGEST_BYTES) return null;
        this.#need(hdr + len);
        this.pos = p + hdr + len;
        return engineHashFromBytes(bytes.subarray(p + hdr, p + hdr + len));
      }
      default:
        if (b >= 0xe0) {
          this.pos = p + 1;
          return hashFromU32Pair(0xffff_ffff, (b - 0x100) >>> 0);
        }
        if (this.isStr()) {
          const s = this.tryStr()!;
          if (s === "") {
            this.pos = p;
            return null;
          }
          return engineHashFromString(s);
        }
        return null;
    }
  }

  /**
   * The next value if it is an integer in [0, 2^32) (consumed), else -1 (nothing
   * consumed). Token ids take this path, so it handles the common widths inline.
   */
  tryUint32(): number {
    const bytes = this.bytes;
    const p = this.pos;
    if (p >= bytes.length) throw new MsgpackFormatError("truncated: value expected");
    const b = bytes[p]!;
    if (b <= 0x7f) {
      this.pos = p + 1;
      return b;
    }
    if (b === 0xcd) {
      this.#need(3);
      this.pos = p + 3;
      return (bytes[p + 1]! << 8) | bytes[p + 2]!;
    }
    if (b === 0xce) {
      this.#need(5);
      this.pos = p + 5;
      return this.view.getUint32(p + 1);
    }
    if (b === 0xcc) {
      this.#need(2);
      this.pos = p + 2;
      return bytes[p + 1]!;
    }
    if (!this.isInt()) return -1;
    let n: number;
    try {
      n = this.tryInt()!;
    } catch {
      return -1;
    }
    if (n < 0 || n > 0xffff_ffff) {
      this.pos = p;
      return -1;
    }
    return n;
  }

  /** Skip one value of any type, however nested (up to `MAX_SKIP_DEPTH`). */
  skip(depth = 0): void {
    if (depth > MAX_SKIP_DEPTH) throw new MsgpackFormatError("nesting too deep");
    const b = this.peek();
    if ((b >= 0x90 && b <= 0x9f) || b === 0xdc || b === 0xdd) {
      const n = this.tryArrayHeader();
      for (let i = 0; i < n; i++) this.skip(depth + 1);
    } else if ((b >= 0x80 && b <= 0x8f) || b === 0xde || b === 0xdf) {
      const n = this.tryMapHeader();
      for (let i = 0; i < 2 * n; i++) this.skip(depth + 1);
    } else this.#skipBytes(this.#scalarSize(b));
  }

  /** Total size in bytes (header included) of the scalar starting at `pos`. */
  #scalarSize(b: number): number {
    const p = this.pos;
    const v = this.view;
    if (b <= 0x7f || b >= 0xe0 || b === 0xc0 || b === 0xc2 || b === 0xc3) return 1;
    if (b >= 0xa0 && b <= 0xbf) return 1 + (b & 0x1f);
    switch (b) {
      case 0xcc:
      case 0xd0:
        return 2;
      case 0xcd:
      case 0xd1:
      case 0xd4:
        return 3;
      case 0xd5:
        return 4;
      case 0xce:
      case 0xd2:
      case 0xca:
        return 5;
      case 0xd6:
        return 6;
      case 0xcf:
      case 0xd3:
      case 0xcb:
        return 9;
      case 0xd7:
        return 10;
      case 0xd8:
        return 18;
      case 0xc4:
      case 0xd9:
        this.#need(2);
        return 2 + this.bytes[p + 1]!;
      case 0xc5:
      case 0xda:
        this.#need(3);
        return 3 + v.getUint16(p + 1);
      case 0xc6:
      case 0xdb:
        this.#need(5);
        return 5 + v.getUint32(p + 1);
      case 0xc7:
        this.#need(2);
        return 3 + this.bytes[p + 1]!;
      case 0xc8:
        this.#need(3);
        return 4 + v.getUint16(p + 1);
      case 0xc9:
        this.#need(5);
        return 6 + v.getUint32(p + 1);
      default:
        // 0xc1 is the one byte msgpack never uses.
        throw new MsgpackFormatError(`reserved type byte 0x${b.toString(16)} at offset ${p}`);
    }
  }

  #skipBytes(n: number): void {
    this.#need(n);
    this.pos += n;
  }

  /** A short description of the next value's type, for error messages. */
  describeNext(): string {
    if (this.atEnd) return "end of input";
    const b = this.bytes[this.pos]!;
    if (this.isInt()) return "an integer";
    if (this.isStr()) return "a string";
    if (b === 0xc0) return "nil";
    if (b === 0xc2 || b === 0xc3) return "a boolean";
    if (b === 0xca || b === 0xcb) return "a float";
    if (b >= 0xc4 && b <= 0xc6) return "binary";
    if ((b >= 0x90 && b <= 0x9f) || b === 0xdc || b === 0xdd) return "an array";
    if ((b >= 0x80 && b <= 0x8f) || b === 0xde || b === 0xdf) return "a map";
    if (b === 0xc1) return "a reserved byte";
    return "an extension value";
  }
}

/** UTF-8 bytes to a string; short ASCII (every key and tag) without calling TextDecoder. */
function decodeUtf8(bytes: Uint8Array, start: number, end: number): string {
  if (end - start <= 32) {
    let s = "";
    let i = start;
    for (; i < end; i++) {
      const c = bytes[i]!;
      if (c >= 0x80) break;
      s += String.fromCharCode(c);
    }
    if (i === end) return s;
  }
  try {
    return UTF8.decode(bytes.subarray(start, end));
  } catch {
    throw new MsgpackFormatError(`invalid UTF-8 in string at offset ${start}`);
  }
}
