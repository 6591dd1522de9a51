/**
 * @gpumem/allocator-pinned: registers the 'pinned' strategy on import.
 * @packageDocumentation
 */
import { registerAllocator } from '@gpumem/allocator-core';
import { PinnedAllocator, type PinnedAllocatorOptions } from './pinned-allocator.js';

declare module '@gpumem/allocator-core' {
  interface AllocatorOptionsMap {
    pinned: PinnedAllocatorOptions;
  }
}

registerAllocator('pinned', (options) => new PinnedAllocator(options), {
  description:
    'caching pool over mapped pinned host memory that kernels use in place: 512 B rounding, 2 MiB segments, per-stream free lists, pins at most what the host has available (host memory without a GPU)',
  // The host twin runs the same pool over plain host memory where there is no GPU.
  requiresCuda: false,
  nativeLayers: true,
  // Once warm, malloc and free make no driver calls (as the pool's): capture works.
  capturable: true,
  // Its memory is host memory: comparisons on a GPU leave it out unless named.
  hostMemory: true,
  // Portable mapped memory: every device reaches it; peerAccess is checked and needs nothing more.
  peerAccess: true,
});

export { PinnedAllocator, type PinnedAllocatorOptions, type PinnedUpstream } from './pinned-allocator.js';
