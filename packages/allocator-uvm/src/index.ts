/**
 * @gpumem/allocator-uvm: registers the 'uvm' strategy on import.
 * @packageDocumentation
 */
import { registerAllocator } from '@gpumem/allocator-core';
import { UvmAllocator, type UvmAllocatorOptions, uvmStrategy } from './uvm-allocator.js';

declare module '@gpumem/allocator-core' {
  interface AllocatorOptionsMap {
    uvm: UvmAllocatorOptions;
  }
}

registerAllocator(uvmStrategy.name, (options) => new UvmAllocator(options), uvmStrategy.registration);

export { UvmAllocator, defaultLogThresholdBytes, type UvmAllocatorOptions, type AdviseTarget } from './uvm-allocator.js';
