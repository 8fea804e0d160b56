/**
 * CRC-32 (IEEE 802.3, the zlib/PNG polynomial), incremental: `crc32(bytes, crc32(prev))`
 * continues a running checksum. Used to refuse a damaged index snapshot.
 */

const TABLE = (() => {
  const t = new Int32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c;
  }
  return t;
})();

/** CRC-32 of `bytes`, continuing from `prev` (the CRC of what came before; 0 at the start). */
export function crc32(bytes: Uint8Array, prev = 0): number {
  const t = TABLE;
  let c = ~prev;
  for (let i = 0; i < bytes.length; i++) c = t[(c ^ bytes[i]!) & 0xff]! ^ (c >>> 8);
  return ~c >>> 0;
}
