/**
 * @gpumem/allocator-expandable: registers the 'expandable' strategy on import.
 * @packageDocumentation
 */
import { registerAllocator } from '@gpumem/allocator-core';
import type { expandableDescriptor } from './options.generated.js';
import { ExpandableAllocator, type ExpandableAllocatorOptions, expandableStrategy } from './expandable-allocator.js';

declare module '@gpumem/allocator-core' {
  interface AllocatorFlagsMap {
    expandable: typeof expandableDescriptor.flags;
  }
  interface AllocatorOptionsMap {
    expandable: ExpandableAllocatorOptions;
  }
}

registerAllocator(expandableStrategy.name, (options) => new ExpandableAllocator(options), expandableStrategy.registration);

export { ExpandableAllocator, type ExpandableAllocatorOptions, type ExpandableUpstream } from './expandable-allocator.js';
