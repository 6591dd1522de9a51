/**
 * The 'caching' strategy: a twin of PyTorch's CUDACachingAllocator (native), over cudaMalloc or
 * host memory: PyTorch's size rounding (512 B, roundup_power2_divisions), small and large pools
 * with their segment sizes, best fit per stream, its splitting rules and max_split_size, coalescing,
 * garbage collection, the free-and-retry order when a segment cannot be had, and expandable
 * segments. It replays a recorded PyTorch program as PyTorch's own allocator would run it. Its
 * options and registry entry come from the native descriptor (./options.generated.ts).
 * Side-effect free; index.ts registers it.
 * @module
 */
import { defineNativeStrategy, NativeStrategyAllocator, type OptionsOf } from '@gpumem/allocator-core';
import { cachingDescriptor } from './options.generated.js';

export const cachingStrategy = defineNativeStrategy(cachingDescriptor);

/** The 'caching' strategy's options (from its native descriptor). */
export interface CachingAllocatorOptions extends OptionsOf<typeof cachingStrategy.options> {}

export class CachingAllocator extends NativeStrategyAllocator<typeof cachingStrategy> {
  /** The upstream actually used ('auto' resolved). */
  readonly upstream = this.resolvedUpstream;

  constructor(options: CachingAllocatorOptions = {}) {
    super(cachingStrategy, options);
  }
}
