/**
 * Seeded randomness. The scheduler takes its rng as an argument (tie breaks, softmax
 * sampling); the service passes Math.random, while the trace replay, the demo's workload,
 * the benchmarks' workloads and the tests pass these, so a run depends only on its seed.
 */

/** A generator of floats in [0, 1). */
export type Rng = () => number;

/** mulberry32: tiny, fast, good enough for routing choices; seed is any 32-bit integer. */
export function seededRng(seed: number): Rng {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A seed derived from a base seed and a label, so each policy gets its own stream. */
export function deriveSeed(seed: number, label: string): number {
  let h = (seed ^ 0x811c9dc5) >>> 0;
  for (let i = 0; i < label.length; i++) {
    h ^= label.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}
