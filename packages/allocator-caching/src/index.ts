/**
 * @gpumem/allocator-caching: registers the 'caching' strategy (PyTorch's CUDACachingAllocator
 * twin) on import.
 * @packageDocumentation
 */
import { registerAllocator } from '@gpumem/allocator-core';
import { CachingAllocator, type CachingAllocatorOptions, cachingStrategy } from './caching-allocator.js';

declare module '@gpumem/allocator-core' {
  interface AllocatorOptionsMap {
    caching: CachingAllocatorOptions;
  }
}

// Tables name it after the allocator it reproduces: `caching (PyTorch's allocator)`.
registerAllocator(cachingStrategy.name, (options) => new CachingAllocator(options), {
  ...cachingStrategy.registration,
  models: "PyTorch's allocator",
});

export { CachingAllocator, type CachingAllocatorOptions } from './caching-allocator.js';
