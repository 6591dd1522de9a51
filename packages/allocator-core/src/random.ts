/**
 * A seeded pseudo-random generator for synthetic workloads: the traces and patterns of the
 * benchmarks and the comparison's fixture are the same run after run, and on every machine.
 * @module
 */

/**
 * mulberry32: a small generator of 32-bit state. Returns a function giving numbers in [0, 1), the
 * same sequence for the same `seed` (taken as an unsigned 32-bit integer). Not for cryptography.
 */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}
