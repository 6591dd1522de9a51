/**
 * The 'expandable' strategy: expandable segments. Each stream gets one virtual address range, and
 * physical memory is mapped into it in granules as the memory in use grows (CUDA's virtual memory
 * management: one cuMemCreate + cuMemMap per run of consecutive granules an allocation needs), so
 * blocks never have to fit a fixed segment and changing shapes do not strand reserved memory the
 * way a segment pool does. Best fit with splitting and coalescing inside each range; memory freed on
 * another stream is reused after an event; idle runs (every granule idle: a run is unmapped whole)
 * are unmapped by trim(), past `releaseThreshold`, before growing past `gcThreshold` of the
 * capacity, before reserved passes its peak (`unmapIdleBeforeGrowth`), and when a map fails (then every stream's idle runs go and the map is retried once).
 * Over host memory (no GPU) the same logic runs on an mmap reservation whose runs are memfds
 * mapped into it, one each. upstreamAllocCount/upstreamFreeCount/segmentCount count runs. Its options and registry entry come from
 * the native descriptor (./options.generated.ts). Side-effect free; index.ts registers it.
 * @module
 */
import { defineNativeStrategy, NativeStrategyAllocator, type OptionsOf } from '@gpumem/allocator-core';
import { expandableDescriptor } from './options.generated.js';

export const expandableStrategy = defineNativeStrategy(expandableDescriptor);

/** The 'expandable' strategy's options (from its native descriptor). */
export interface ExpandableAllocatorOptions extends OptionsOf<typeof expandableStrategy.options> {}

/** Where the granules come from. */
export type ExpandableUpstream = NonNullable<ExpandableAllocatorOptions['upstream']>;

export class ExpandableAllocator extends NativeStrategyAllocator<typeof expandableStrategy> {
  /** The upstream actually used ('auto' resolved). */
  readonly upstream = this.resolvedUpstream;

  constructor(options: ExpandableAllocatorOptions = {}) {
    super(expandableStrategy, options);
  }
}
