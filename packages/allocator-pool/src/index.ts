/**
 * @gpumem/allocator-pool: registers the 'pool' strategy on import.
 * @packageDocumentation
 */
import { registerAllocator } from '@gpumem/allocator-core';
import { PoolAllocator, type PoolAllocatorOptions } from './pool-allocator.js';

declare module '@gpumem/allocator-core' {
  interface AllocatorOptionsMap {
    pool: PoolAllocatorOptions;
  }
}

registerAllocator('pool', (options) => new PoolAllocator(options), {
  description:
    'caching block pool: 512 B rounding, best fit with split/coalesce, per-stream free lists (over cudaMalloc, or host memory without a GPU)',
  requiresCuda: false,
  nativeLayers: true,
  capturable: true,
  peerAccess: true,
});

export { PoolAllocator, type PoolAllocatorOptions, type PoolUpstream } from './pool-allocator.js';
