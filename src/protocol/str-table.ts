/**
 * A fixed set of ASCII strings matched straight against msgpack bytes.
 *
 * Every map event repeats the same few keys and tags; building a JS string for each one
 * and hashing it into a Map costs more than the rest of the event. Comparing the bytes
 * with the few candidates of the same length costs almost nothing.
 */

export class StrTable {
  readonly names: readonly string[];
  /** By byte length: the candidates of that length, with their ids. */
  readonly #byLength: (readonly [Uint8Array, number])[][] = [];

  constructor(names: readonly string[]) {
    this.names = names;
    const utf8 = new TextEncoder();
    names.forEach((name, id) => {
      const bytes = utf8.encode(name);
      const bucket = this.#byLength[bytes.length] ?? [];
      bucket.push([bytes, id]);
      this.#byLength[bytes.length] = bucket;
    });
  }

  /** Id of the string held in `bytes[start, start + length)`, or -1 if it is not in the table. */
  match(bytes: Uint8Array, start: number, length: number): number {
    const bucket = this.#byLength[length];
    if (bucket === undefined) return -1;
    outer: for (const [candidate, id] of bucket) {
      for (let i = length - 1; i >= 0; i--) {
        if (bytes[start + i] !== candidate[i]) continue outer;
      }
      return id;
    }
    return -1;
  }
}
