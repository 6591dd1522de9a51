/**
 * @gpumem/allocator-tiered: registers the 'tiered' strategy on import.
 * @packageDocumentation
 */
import { registerAllocator } from '@gpumem/allocator-core';
import { TieredAllocator, type TieredAllocatorOptions } from './tiered-allocator.js';

declare module '@gpumem/allocator-core' {
  interface AllocatorOptionsMap {
    tiered: TieredAllocatorOptions;
  }
}

registerAllocator('tiered', (options) => new TieredAllocator(options), {
  description:
    'device memory first, then pinned host memory kernels use in place (CUDA VMM, or memfd without a GPU); placement by tag, prefetch moves blocks between tiers at the same address',
  // The host twin runs it anywhere.
  requiresCuda: false,
  nativeLayers: true,
  // A new block or a move is a cuMemCreate + cuMemMap, which a capture cannot hold.
  capturable: false,
  hostMemory: false,
  spillsToHost: true,
  peerAccess: true,
});

export { TieredAllocator, type TieredAllocatorOptions, type TieredUpstream, type TierChoice } from './tiered-allocator.js';
