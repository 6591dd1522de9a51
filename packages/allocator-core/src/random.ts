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

/**
 * xorshift32 (Marsaglia's 13, 17, 5): the generator of bench/alloc's mixed-size trace, bench/soak's
 * operations, the conformance suite's byte patterns and the MLP's shuffle order. Returns a function
 * giving the next state as an unsigned 32-bit integer (divide by 2 ** 32 for [0, 1)). `state` is
 * taken as a 32-bit integer; throws RangeError for 0, where the sequence would stay 0.
 */
export function xorshift32(state: number): () => number {
  let x = state | 0;
  if (x === 0) throw new RangeError('xorshift32: the state must not be 0 as a 32-bit integer (the sequence would stay 0)');
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return x >>> 0;
  };
}
