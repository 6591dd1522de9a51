/**
 * @gpumem/allocator-async: registers the 'async' strategy on import.
 * @packageDocumentation
 */
import { registerAllocator } from '@gpumem/allocator-core';
import { AsyncAllocator, type AsyncAllocatorOptions, asyncStrategy } from './async-allocator.js';

declare module '@gpumem/allocator-core' {
  interface AllocatorOptionsMap {
    async: AsyncAllocatorOptions;
  }
}

registerAllocator(asyncStrategy.name, (options) => new AsyncAllocator(options), asyncStrategy.registration);

export { AsyncAllocator, type AsyncAllocatorOptions } from './async-allocator.js';
