/**
 * A small msgpack writer that follows msgspec's choices byte for byte: floats are
 * always float64, integers take the smallest width (unsigned forms for values ≥ 0,
 * signed for negatives), strings the smallest str header. The engine-side encoder uses
 * it so tests and simulated engines put exactly what vLLM/SGLang would on the wire.
 */

const UTF8 = new TextEncoder();

export class MsgpackWriter {
  #buf = new Uint8Array(256);
  #view = new DataView(this.#buf.buffer);
  #len = 0;

  /** The bytes written so far (a copy, safe to keep). */
  finish(): Uint8Array {
    return this.#buf.slice(0, this.#len);
  }

  #ensure(n: number): void {
    if (this.#len + n <= this.#buf.length) return;
    let cap = this.#buf.length * 2;
    while (cap < this.#len + n) cap *= 2;
    const next = new Uint8Array(cap);
    next.set(this.#buf.subarray(0, this.#len));
    this.#buf = next;
    this.#view = new DataView(next.buffer);
  }

  #byte(b: number): void {
    this.#ensure(1);
    this.#buf[this.#len++] = b;
  }

  nil(): void {
    this.#byte(0xc0);
  }

  bool(v: boolean): void {
    this.#byte(v ? 0xc3 : 0xc2);
  }

  float64(x: number): void {
    this.#ensure(9);
    this.#buf[this.#len] = 0xcb;
    this.#view.setFloat64(this.#len + 1, x);
    this.#len += 9;
  }

  /** A safe JS integer, smallest width. */
  int(n: number): void {
    if (!Number.isSafeInteger(n)) throw new RangeError(`${n} is not a safe integer`);
    if (n >= 0) {
      if (n <= 0x7f) this.#byte(n);
      else if (n <= 0xff) this.#head(0xcc, 1, n);
      else if (n <= 0xffff) this.#head(0xcd, 2, n);
      else if (n <= 0xffff_ffff) this.#head(0xce, 4, n);
      else this.bigint(BigInt(n));
    } else if (n >= -32) this.#byte(n & 0xff);
    else if (n >= -0x80) this.#head(0xd0, 1, n);
    else if (n >= -0x8000) this.#head(0xd1, 2, n);
    else if (n >= -0x8000_0000) this.#head(0xd2, 4, n);
    else this.bigint(BigInt(n));
  }

  /** An integer in [-2^63, 2^64), smallest width (uint64 only for values ≥ 2^63). */
  bigint(v: bigint): void {
    if (v < -(1n << 63n) || v >= 1n << 64n) throw new RangeError(`${v} does not fit 64 bits`);
    if (v >= -0x8000_0000n && v <= 0xffff_ffffn) {
      this.int(Number(v));
      return;
    }
    this.#ensure(9);
    this.#buf[this.#len] = v >= 0n ? 0xcf : 0xd3;
    const u = BigInt.asUintN(64, v);
    this.#view.setUint32(this.#len + 1, Number(u >> 32n));
    this.#view.setUint32(this.#len + 5, Number(u & 0xffff_ffffn));
    this.#len += 9;
  }

  #head(type: number, width: 1 | 2 | 4, n: number): void {
    this.#ensure(1 + width);
    const at = this.#len;
    this.#buf[at] = type;
    if (width === 1) this.#buf[at + 1] = n & 0xff;
    else if (width === 2) this.#view.setUint16(at + 1, n & 0xffff);
    else this.#view.setUint32(at + 1, n >>> 0);
    this.#len += 1 + width;
  }

  str(s: string): void {
    const bytes = UTF8.encode(s);
    const n = bytes.length;
    if (n <= 31) this.#byte(0xa0 | n);
    else if (n <= 0xff) this.#head(0xd9, 1, n);
    else if (n <= 0xffff) this.#head(0xda, 2, n);
    else this.#head(0xdb, 4, n);
    this.#raw(bytes);
  }

  bin(bytes: Uint8Array): void {
    const n = bytes.length;
    if (n <= 0xff) this.#head(0xc4, 1, n);
    else if (n <= 0xffff) this.#head(0xc5, 2, n);
    else this.#head(0xc6, 4, n);
    this.#raw(bytes);
  }

  arrayHeader(n: number): void {
    if (n <= 15) this.#byte(0x90 | n);
    else if (n <= 0xffff) this.#head(0xdc, 2, n);
    else this.#head(0xdd, 4, n);
  }

  mapHeader(n: number): void {
    if (n <= 15) this.#byte(0x80 | n);
    else if (n <= 0xffff) this.#head(0xde, 2, n);
    else this.#head(0xdf, 4, n);
  }

  /** Bytes that are already msgpack (e.g. a pre-encoded value). */
  #raw(bytes: Uint8Array): void {
    this.#ensure(bytes.length);
    this.#buf.set(bytes, this.#len);
    this.#len += bytes.length;
  }
}
