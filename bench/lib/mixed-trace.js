// The mixed-size allocation trace of the alloc benchmarks (bench/alloc/run.js, before-after.js).
import { xorshift32 } from '@gpumem/allocator-core/tools';

const MiB = 2 ** 20;

/**
 * `count` allocation sizes like a training step's: many small tensors, some medium, a few large ones
 * (replayed with a window of live allocations). Deterministic (xorshift), so every run measures the
 * same trace.
 */
export function mixedTrace(count) {
  const next = xorshift32(0x9e3779b9);
  const rand = () => next() / 2 ** 32;
  const out = new Float64Array(count);
  for (let i = 0; i < count; i++) {
    const r = rand();
    if (r < 0.6) out[i] = 64 + Math.floor(rand() * 16 * 1024);
    else if (r < 0.9) out[i] = 16 * 1024 + Math.floor(rand() * 2 * MiB);
    else out[i] = 2 * MiB + Math.floor(rand() * 30 * MiB);
  }
  return out;
}
