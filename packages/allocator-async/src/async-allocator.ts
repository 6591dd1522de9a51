/**
 * The 'async' strategy: cudaMallocAsync on a cudaMemPool_t it owns. The release threshold is how
 * much freed memory the pool keeps at a synchronisation point (default: all of it); trim(n)
 * gives the rest back. Reserved bytes come from the pool's own attributes. `peerAccess` is set on
 * the owned pool when the allocator is made (cudaMemPoolSetAccess, read/write). Its options and
 * registry entry come from the native descriptor (./options.generated.ts).
 * Side-effect free; index.ts registers it.
 * @module
 */
import { defineNativeStrategy, NativeStrategyAllocator, type OptionsOf } from '@gpumem/allocator-core';
import { asyncDescriptor } from './options.generated.js';

export const asyncStrategy = defineNativeStrategy(asyncDescriptor);

/** The 'async' strategy's options (from its native descriptor). */
export interface AsyncAllocatorOptions extends OptionsOf<typeof asyncStrategy.options> {}

export class AsyncAllocator extends NativeStrategyAllocator<typeof asyncStrategy> {
  /** The release threshold; Infinity for the default (keep everything). */
  readonly releaseThreshold: number = this.parsed.releaseThreshold ?? Infinity;

  constructor(options: AsyncAllocatorOptions = {}) {
    super(asyncStrategy, options);
  }
}
