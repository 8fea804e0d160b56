/**
 * The rare case of one worker holding one node under two or more engine hashes (vLLM
 * hashes extra keys such as multimodal inputs or a cache salt that the router's key does
 * not see, or an engine restarted with a new hash seed without a clear). The holder word
 * then has the alias bit set and the per-tier counts of that worker's entries live here,
 * so removing one hash does not drop a tier another hash still holds.
 */

/** Per (node, worker): `[gpu, host, disk, entries]` counts. */
export class AliasCounts {
  readonly #counts = new Map<number, number[]>();

  get size(): number {
    return this.#counts.size;
  }

  /**
   * Starts tracking (node, worker), which so far had one entry with `firstMask`, and adds
   * a second entry with `mask`; returns the union tier mask.
   */
  start(node: number, worker: number, firstMask: number, mask: number): number {
    const c = [0, 0, 0, 1];
    add(c, firstMask, 1);
    add(c, mask, 1);
    c[3]!++;
    this.#counts.set(key(node, worker), c);
    return maskOf(c);
  }

  /**
   * Replaces one entry's mask `from` by `to` (`to` = 0: the entry is gone; `from` = 0: a
   * new entry). Returns the union mask, and `-1 - mask` when only one entry remains (the
   * caller clears the alias bit; tracking stops).
   */
  change(node: number, worker: number, from: number, to: number): number {
    const k = key(node, worker);
    const c = this.#counts.get(k)!;
    add(c, from, -1);
    add(c, to, 1);
    if (from === 0) c[3]!++;
    if (to === 0) c[3]!--;
    const mask = maskOf(c);
    if (c[3]! > 1) return mask;
    this.#counts.delete(k);
    return -1 - mask;
  }
}

function key(node: number, worker: number): number {
  return node * 65536 + worker;
}

function add(c: number[], mask: number, d: number): void {
  if (mask & 1) c[0]! += d;
  if (mask & 2) c[1]! += d;
  if (mask & 4) c[2]! += d;
}

function maskOf(c: number[]): number {
  return (c[0]! > 0 ? 1 : 0) | (c[1]! > 0 ? 2 : 0) | (c[2]! > 0 ? 4 : 0);
}
