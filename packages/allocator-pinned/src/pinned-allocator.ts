/**
 * The 'pinned' strategy: the caching block pool (native, the same code as 'pool') over mapped
 * pinned host memory. Segments come from cudaHostAlloc(cudaHostAllocMapped | cudaHostAllocPortable),
 * so kernels read and write the memory in place (the host pointer is the device pointer, checked on
 * every segment), and copies to and from it run at full link speed. Sizes round to 512 B; small
 * requests share 2 MiB segments and large ones get segments rounded to 2 MiB, not to a power of two
 * (300 MiB + 1 B reserves 302 MiB, where PyTorch's pinned allocator takes 512 MiB). Stream-ordered
 * reuse with CUDA events, recordStream, release-and-retry on out-of-memory, trim().
 *
 * Pinned pages cannot be swapped: the leaf caps what it pins at the host's MemAvailable (when the
 * allocator is created) less 10% of MemTotal, and `maxReservedBytes` lowers that cap; a request past
 * it is an OutOfMemoryError saying it would pin more than the host has available.
 *
 * Where there is no GPU, upstream 'host' (the default there) runs the same pool over plain host
 * memory. Its options and registry entry come from the native descriptor (./options.generated.ts).
 * Side-effect free; index.ts registers it.
 * @module
 */
import { defineNativeStrategy, NativeStrategyAllocator, type OptionsOf } from '@gpumem/allocator-core';
import { pinnedDescriptor } from './options.generated.js';

export const pinnedStrategy = defineNativeStrategy(pinnedDescriptor);

/** The 'pinned' strategy's options (from its native descriptor). */
export interface PinnedAllocatorOptions extends OptionsOf<typeof pinnedStrategy.options> {}

/** Where the segments come from. */
export type PinnedUpstream = NonNullable<PinnedAllocatorOptions['upstream']>;

export class PinnedAllocator extends NativeStrategyAllocator<typeof pinnedStrategy> {
  /** The upstream actually used ('auto' resolved): pinned memory is used by kernels on `device`'s streams. */
  readonly upstream = this.resolvedUpstream;

  constructor(options: PinnedAllocatorOptions = {}) {
    super(pinnedStrategy, options);
  }
}
