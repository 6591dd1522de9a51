/**
 * @gpumem/allocator-uvm: registers the 'uvm' strategy on import.
 * @packageDocumentation
 */
import { registerAllocator } from '@gpumem/allocator-core';
import { UvmAllocator, type UvmAllocatorOptions } from './uvm-allocator.js';

declare module '@gpumem/allocator-core' {
  interface AllocatorOptionsMap {
    uvm: UvmAllocatorOptions;
  }
}

registerAllocator('uvm', (options) => new UvmAllocator(options), {
  description: 'cudaMallocManaged (unified memory) with prefetch-on-allocate and cudaMemAdvise hints',
  requiresCuda: true,
  nativeLayers: true,
  managedMemory: true,
  peerAccess: true,
});

export { UvmAllocator, defaultLogThresholdBytes, type UvmAllocatorOptions, type AdviseTarget } from './uvm-allocator.js';
