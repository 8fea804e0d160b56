/**
 * One worker's set of routed block keys in least-recently-used order, with each key's
 * last-use tick: what `RoutedPrefixIndex` keeps per worker. A `Map<number, number>` did
 * this by `delete` + `set` per block (keys above 2^31 are heap numbers, and re-inserting
 * leaves holes the Map must compact): 42 % of a `sglang_cache_aware` replay. Here keys are
 * the two words of `blockKeyNumber` (hi masked to 21 bits, lo), entries live in typed
 * arrays with a free list, an open-addressing table (linear probing, backward-shift
 * deletion) finds them and a doubly linked list keeps their order, oldest first.
 */

const NONE = -1;

export class BlockLru {
  #hi: Int32Array = new Int32Array(64);
  #lo: Int32Array = new Int32Array(64);
  #tick: Float64Array = new Float64Array(64);
  #prev: Int32Array = new Int32Array(64);
  #next: Int32Array = new Int32Array(64);
  #used = 0;
  #free = NONE;
  #oldest = NONE;
  #newest = NONE;
  #size = 0;
  #slots: Int32Array = new Int32Array(128).fill(NONE);
  #mask = 127;

  get size(): number {
    return this.#size;
  }

  /** The key's last-use tick, or 0 when absent. */
  get(hi: number, lo: number): number {
    const e = this.#slots[this.#slot(hi & 0x1f_ffff, lo | 0)]!;
    return e === NONE ? 0 : this.#tick[e]!;
  }

  has(hi: number, lo: number): boolean {
    return this.#slots[this.#slot(hi & 0x1f_ffff, lo | 0)]! !== NONE;
  }

  /** Insert the key or refresh it: it becomes the newest, with `tick`. */
  touch(hi: number, lo: number, tick: number): void {
    hi &= 0x1f_ffff;
    lo |= 0;
    const s = this.#slot(hi, lo);
    let e = this.#slots[s]!;
    if (e !== NONE) {
      this.#tick[e] = tick;
      if (e === this.#newest) return;
      this.#unlink(e);
      this.#append(e);
      return;
    }
    e = this.#alloc();
    this.#hi[e] = hi;
    this.#lo[e] = lo;
    this.#tick[e] = tick;
    this.#append(e);
    this.#slots[s] = e;
    this.#size++;
    if (this.#size * 2 > this.#slots.length) this.#rehash(this.#slots.length * 2);
  }

  /** Drop the oldest keys until at most `max` remain. */
  trim(max: number): void {
    while (this.#size > max && this.#oldest !== NONE) {
      const e = this.#oldest;
      this.#unlink(e);
      this.#deleteSlot(this.#slot(this.#hi[e]!, this.#lo[e]!));
      this.#next[e] = this.#free;
      this.#free = e;
      this.#size--;
    }
  }

  #alloc(): number {
    if (this.#free !== NONE) {
      const e = this.#free;
      this.#free = this.#next[e]!;
      return e;
    }
    if (this.#used === this.#hi.length) this.#grow();
    return this.#used++;
  }

  #append(e: number): void {
    this.#prev[e] = this.#newest;
    this.#next[e] = NONE;
    if (this.#newest === NONE) this.#oldest = e;
    else this.#next[this.#newest] = e;
    this.#newest = e;
  }

  #unlink(e: number): void {
    const p = this.#prev[e]!;
    const n = this.#next[e]!;
    if (p === NONE) this.#oldest = n;
    else this.#next[p] = n;
    if (n === NONE) this.#newest = p;
    else this.#prev[n] = p;
  }

  #home(hi: number, lo: number): number {
    let h = Math.imul(lo ^ Math.imul(hi, 0x9e3779b1), 0x85ebca6b);
    h ^= h >>> 15;
    return h & this.#mask;
  }

  #slot(hi: number, lo: number): number {
    const slots = this.#slots;
    let s = this.#home(hi, lo);
    for (;;) {
      const e = slots[s]!;
      if (e === NONE || (this.#lo[e] === lo && this.#hi[e] === hi)) return s;
      s = (s + 1) & this.#mask;
    }
  }

  #deleteSlot(s: number): void {
    const slots = this.#slots;
    const mask = this.#mask;
    let hole = s;
    let i = s;
    for (;;) {
      i = (i + 1) & mask;
      const e = slots[i]!;
      if (e === NONE) break;
      const home = this.#home(this.#hi[e]!, this.#lo[e]!);
      const between = hole <= i ? home > hole && home <= i : home > hole || home <= i;
      if (!between) {
        slots[hole] = e;
        hole = i;
      }
    }
    slots[hole] = NONE;
  }

  #rehash(size: number): void {
    const old = this.#slots;
    this.#slots = new Int32Array(size).fill(NONE);
    this.#mask = size - 1;
    for (const e of old) if (e !== NONE) this.#slots[this.#slot(this.#hi[e]!, this.#lo[e]!)] = e;
  }

  #grow(): void {
    const n = this.#hi.length * 2;
    const grow32 = (a: Int32Array): Int32Array => {
      const b = new Int32Array(n);
      b.set(a);
      return b;
    };
    this.#hi = grow32(this.#hi);
    this.#lo = grow32(this.#lo);
    this.#prev = grow32(this.#prev);
    this.#next = grow32(this.#next);
    const t = new Float64Array(n);
    t.set(this.#tick);
    this.#tick = t;
  }
}
