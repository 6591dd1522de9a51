/**
 * @gpumem/allocator-pinned: registers the 'pinned' strategy on import.
 * @packageDocumentation
 */
import { registerAllocator } from '@gpumem/allocator-core';
import { PinnedAllocator, type PinnedAllocatorOptions, pinnedStrategy } from './pinned-allocator.js';

declare module '@gpumem/allocator-core' {
  interface AllocatorOptionsMap {
    pinned: PinnedAllocatorOptions;
  }
}

registerAllocator(pinnedStrategy.name, (options) => new PinnedAllocator(options), pinnedStrategy.registration);

export { PinnedAllocator, type PinnedAllocatorOptions, type PinnedUpstream } from './pinned-allocator.js';
