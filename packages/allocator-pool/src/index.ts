/**
 * @gpumem/allocator-pool: registers the 'pool' strategy on import.
 * @packageDocumentation
 */
import { registerAllocator } from '@gpumem/allocator-core';
import { PoolAllocator, type PoolAllocatorOptions, poolStrategy } from './pool-allocator.js';

declare module '@gpumem/allocator-core' {
  interface AllocatorOptionsMap {
    pool: PoolAllocatorOptions;
  }
}

registerAllocator(poolStrategy.name, (options) => new PoolAllocator(options), poolStrategy.registration);

export { PoolAllocator, type PoolAllocatorOptions, type PoolUpstream } from './pool-allocator.js';
