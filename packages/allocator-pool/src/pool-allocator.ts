/**
 * The 'pool' strategy: a caching block pool (native) over cudaMalloc, or over host memory where
 * there is no GPU. Sizes round to 512 B; small requests share 2 MiB segments, large ones get
 * segments rounded to 2 MiB; best fit with splitting and coalescing; per-stream free lists with
 * events for cross-stream reuse and recordStream; on out-of-memory it releases cached segments and
 * retries once. Its options and registry entry come from the native descriptor
 * (./options.generated.ts). Side-effect free; index.ts registers it.
 * @module
 */
import { defineNativeStrategy, NativeStrategyAllocator, type OptionsOf } from '@gpumem/allocator-core';
import { poolDescriptor } from './options.generated.js';

export const poolStrategy = defineNativeStrategy(poolDescriptor);

/** The 'pool' strategy's options (from its native descriptor). */
export interface PoolAllocatorOptions extends OptionsOf<typeof poolStrategy.options> {}

/** Where the pool's segments come from. */
export type PoolUpstream = NonNullable<PoolAllocatorOptions['upstream']>;

export class PoolAllocator extends NativeStrategyAllocator<typeof poolStrategy> {
  /** The upstream actually used ('auto' resolved). */
  readonly upstream = this.resolvedUpstream;

  constructor(options: PoolAllocatorOptions = {}) {
    super(poolStrategy, options);
  }
}
