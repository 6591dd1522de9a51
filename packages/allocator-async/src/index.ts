/**
 * @gpumem/allocator-async: registers the 'async' strategy on import.
 * @packageDocumentation
 */
import { registerAllocator } from '@gpumem/allocator-core';
import { AsyncAllocator, type AsyncAllocatorOptions } from './async-allocator.js';

declare module '@gpumem/allocator-core' {
  interface AllocatorOptionsMap {
    async: AsyncAllocatorOptions;
  }
}

registerAllocator('async', (options) => new AsyncAllocator(options), {
  description: 'cudaMallocAsync on an owned cudaMemPool_t with a release threshold',
  requiresCuda: true,
  nativeLayers: true,
  peerAccess: true,
});

export { AsyncAllocator, type AsyncAllocatorOptions } from './async-allocator.js';
