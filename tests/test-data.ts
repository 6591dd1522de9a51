/** Seeded random inputs and error measures shared by the ops suites. */
import { seededRandom as rng } from '@gpumem/allocator-core/tools';

/** n floats uniform in [-scale, scale). */
export function randf(n: number, seed: number, scale = 1): Float32Array {
  const r = rng(seed);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = (r() * 2 - 1) * scale;
  return out;
}

/** n integers uniform in [0, mod). */
export function randi(n: number, mod: number, seed: number): Int32Array {
  const r = rng(seed);
  const out = new Int32Array(n);
  for (let i = 0; i < n; i++) out[i] = Math.floor(r() * mod);
  return out;
}

/** ‖a − b‖ / ‖b‖ (the absolute ‖a − b‖ when b is 0). */
export function relL2(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) throw new Error(`lengths ${a.length} != ${b.length}`);
  let num = 0;
  let den = 0;
  for (let i = 0; i < a.length; i++) {
    const d = a[i]! - b[i]!;
    num += d * d;
    den += b[i]! * b[i]!;
  }
  return den === 0 ? Math.sqrt(num) : Math.sqrt(num / den);
}
