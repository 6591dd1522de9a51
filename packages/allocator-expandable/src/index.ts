/**
 * @gpumem/allocator-expandable: registers the 'expandable' strategy on import.
 * @packageDocumentation
 */
import { registerAllocator } from '@gpumem/allocator-core';
import { ExpandableAllocator, type ExpandableAllocatorOptions } from './expandable-allocator.js';

declare module '@gpumem/allocator-core' {
  interface AllocatorOptionsMap {
    expandable: ExpandableAllocatorOptions;
  }
}

registerAllocator('expandable', (options) => new ExpandableAllocator(options), {
  description:
    'expandable segments: a virtual range per stream, physical memory mapped in granules as it grows (CUDA VMM, or mmap without a GPU)',
  requiresCuda: false,
  nativeLayers: true,
  // Growth maps granules (cuMemCreate/cuMemMap) and unmapping synchronises the streams that used the
  // memory: a capture that needs either fails, so it is not offered for CUDA-graph capture.
  capturable: false,
  peerAccess: true,
});

export { ExpandableAllocator, type ExpandableAllocatorOptions, type ExpandableUpstream } from './expandable-allocator.js';
