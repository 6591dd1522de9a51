/**
 * @gpumem/allocator-tiered: registers the 'tiered' strategy on import.
 * @packageDocumentation
 */
import { registerAllocator } from '@gpumem/allocator-core';
import type { tieredDescriptor } from './options.generated.js';
import { TieredAllocator, type TieredAllocatorOptions, tieredStrategy } from './tiered-allocator.js';

declare module '@gpumem/allocator-core' {
  interface AllocatorFlagsMap {
    tiered: typeof tieredDescriptor.flags;
  }
  interface AllocatorOptionsMap {
    tiered: TieredAllocatorOptions;
  }
}

registerAllocator(tieredStrategy.name, (options) => new TieredAllocator(options), tieredStrategy.registration);

export { TieredAllocator, type TieredAllocatorOptions, type TieredUpstream, type TierChoice } from './tiered-allocator.js';
