/**
 * What a stream keeps of the batches replays applied, until their live copies come: one
 * digest per seq, for one contiguous run of seqs, the newest `cap` at most. The sequencer
 * compares a live copy of a replayed seq with it (docs/ingestion.md, "The stream rules": a
 * live copy with other bytes than the replay's means the replay endpoint serves another
 * stream). Live batches come in seq order, so taking the digest of seq s drops every older
 * one, and a live batch past the newest kept drops them all: memory follows the replayed
 * seqs that live has not reached yet.
 */

/** Consumed items kept before the array is compacted. */
const COMPACT_AFTER = 1024;

export class ReplayedCopies<D> {
  readonly #cap: number;
  /** Seq of `#items[0]`. */
  #from = 0n;
  #items: D[] = [];
  /** Index of the oldest digest still kept. */
  #head = 0;

  constructor(cap: number) {
    this.#cap = cap;
  }

  /** Digests kept. */
  get size(): number {
    return this.#items.length - this.#head;
  }

  clear(): void {
    // Called for every live batch applied: nothing to do (and nothing allocated) when empty.
    if (this.#items.length === 0) return;
    this.#items = [];
    this.#head = 0;
  }

  /** Keep the digest of replayed batch `seq`; a seq that does not follow the newest starts over. */
  add(seq: bigint, digest: D): void {
    if (this.size > 0 && seq !== this.#from + BigInt(this.#items.length)) this.clear();
    if (this.size === 0) {
      this.#items = [];
      this.#head = 0;
      this.#from = seq;
    }
    this.#items.push(digest);
    if (this.size > this.#cap) this.#head++;
    this.#compact();
  }

  /**
   * The digest of `seq` if kept (it and every older one are dropped), else undefined: a
   * seq older than those kept drops nothing, one past the newest drops all.
   */
  take(seq: bigint): D | undefined {
    if (this.size === 0) return undefined;
    const i = seq - this.#from;
    if (i < BigInt(this.#head)) return undefined;
    if (i >= BigInt(this.#items.length)) {
      this.clear();
      return undefined;
    }
    const n = Number(i);
    const digest = this.#items[n];
    this.#head = n + 1;
    if (this.size === 0) this.clear();
    else this.#compact();
    return digest;
  }

  #compact(): void {
    if (this.#head > COMPACT_AFTER && this.#head * 2 > this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#from += BigInt(this.#head);
      this.#head = 0;
    }
  }
}
